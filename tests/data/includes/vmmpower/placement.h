#pragma once
#include "policy_types.h"
