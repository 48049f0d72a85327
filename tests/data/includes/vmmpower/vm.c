#include "vm.h"
