#pragma once
enum place_mode { PLACE_PACK };
