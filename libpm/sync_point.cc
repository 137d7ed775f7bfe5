#include "libpm/sync_point.h"

namespace pm::sync_point {

std::atomic<Hook> g_hook{nullptr};

}  // namespace pm::sync_point
