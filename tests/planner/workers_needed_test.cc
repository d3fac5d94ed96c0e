#include "planner/workers_needed.h"
