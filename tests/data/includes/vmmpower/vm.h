#pragma once
#include "shim.h"
