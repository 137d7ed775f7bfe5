// Entry points of the container implementation for code inside the project
// that substitutes the persistence backend (the crash harness).
#ifndef LIBPM_CONTAINER_IMPL_H_
#define LIBPM_CONTAINER_IMPL_H_

#include <memory>
#include <string>

#include "libpm/persist.h"
#include "pm/container.h"

namespace pm {

// Container::create (create = true) or Container::open, with `opener`
// providing the home view instead of open_pmem_file.
Result<std::unique_ptr<Container>> open_container(const std::string& path, const Options& options,
                                                  bool create, const PersistOpener& opener);

}  // namespace pm

#endif  // LIBPM_CONTAINER_IMPL_H_
