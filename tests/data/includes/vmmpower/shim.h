#pragma once
#include "placement.h"
