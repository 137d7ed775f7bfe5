#include "libpm/tracker.h"

#include <cstdlib>
#include <string_view>

namespace pm {

const char* tracker_name(TrackerKind kind) {
  switch (kind) {
    case TrackerKind::kAuto:
      return "auto";
    case TrackerKind::kUffd:
      return "uffd";
    case TrackerKind::kMprotect:
      return "mprotect";
    case TrackerKind::kHints:
      return "hints";
  }
  return "unknown";
}

bool parse_tracker(std::string_view name, TrackerKind* kind) {
  for (TrackerKind k :
       {TrackerKind::kAuto, TrackerKind::kUffd, TrackerKind::kMprotect, TrackerKind::kHints}) {
    if (name == tracker_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

Result<std::unique_ptr<DirtyTracker>> make_tracker(TrackerKind kind, uint64_t max_len,
                                                   uint64_t uffd_chunks_above, std::string* why) {
  if (kind == TrackerKind::kAuto) {
    const char* env = std::getenv("PM_TRACKER");
    if (env != nullptr && *env != '\0') {
      if (!parse_tracker(env, &kind)) {
        return Status::invalid_argument(std::string("PM_TRACKER=") + env +
                                        ": unknown tracker (use uffd, mprotect, hints or auto)");
      }
      *why = std::string("PM_TRACKER=") + env;
    }
  } else {
    *why = "requested by options";
  }
  switch (kind) {
    case TrackerKind::kUffd:
      return make_uffd_tracker(max_len, uffd_chunks_above);
    case TrackerKind::kMprotect:
      return make_mprotect_tracker(max_len);
    case TrackerKind::kHints:
      return make_hints_tracker(max_len);
    case TrackerKind::kAuto:
      break;
  }
  Result<std::unique_ptr<DirtyTracker>> uffd = make_uffd_tracker(max_len, uffd_chunks_above);
  if (uffd.ok()) {
    *why = "auto: userfaultfd async write-protect available";
    return uffd;
  }
  *why = "auto: " + uffd.status().message() + "; using mprotect";
  return make_mprotect_tracker(max_len);
}

}  // namespace pm
