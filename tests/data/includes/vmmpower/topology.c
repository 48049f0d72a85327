#include "policy_types.h"
