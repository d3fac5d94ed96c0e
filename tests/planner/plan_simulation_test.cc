#include "planner/workers_needed.h"
#include "gtest/gtest.h"
