// Named objects, in the style of Boost.Interprocess: any number of objects
// found by name in a container, beside the (at most 32) named roots.
//
//   using Vec = boost::container::vector<int, pm::allocator<int>>;
//   pm::Result<Vec*> v = pm::find_or_construct<Vec>(*c, "scores", pm::allocator<int>(*c));
//   if (!v.ok()) return v.status();
//   (*v)->push_back(7);
//   pm::Status s = c->commit();
//
// The index is a boost::container::map from a name to the object's address,
// size and type tag, itself allocated in the container and anchored at the
// named root kNamesRoot ("pm.names"). Creating and destroying objects are
// container changes like any other: durable at commit(), dropped by abort().
//
// The index holds nothing that `pm check` or collect() could misread: long
// names are in data blocks (allocator<char>, see allocator.h), and a short
// name's unused buffer bytes are zeroed before the name is moved into its
// node (zero_unused), so no stale stack bytes are stored.
//
// Thread safety: the functions may be called from any thread; they hold the
// container's MutationGuard and a process-wide lock while they touch the
// index. Using the returned object needs the caller's own synchronisation.
//
// Trackers: the index is a Boost container, so creating and destroying named
// objects needs the uffd or mprotect tracker (see allocator.h); with the
// hints tracker they fail with kNotSupported. find() works with any tracker.
#ifndef PM_NAMED_H_
#define PM_NAMED_H_

#include <boost/container/map.hpp>
#include <boost/container/string.hpp>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "pm/allocator.h"
#include "pm/container.h"
#include "pm/status.h"

namespace pm {

// The named root that holds the index of named objects.
inline constexpr std::string_view kNamesRoot = "pm.names";

namespace named_detail {

using String = boost::container::basic_string<char, std::char_traits<char>, allocator<char>>;

// One named object. Persistent: the layout is part of the container's
// contents (kNamesRoot), so it must not change.
struct Entry {
  boost::interprocess::offset_ptr<void> object;
  uint64_t size;      // sizeof(T)
  uint64_t type_tag;  // FNV-1a of typeid(T).name(): stable for one compiler ABI
};
static_assert(sizeof(Entry) == 24);

inline std::string_view view(std::string_view s) { return s; }
inline std::string_view view(const String& s) { return {s.data(), s.size()}; }

// Orders names as bytes; transparent, so lookups take a string_view.
struct NameLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return view(a) < view(b);
  }
};

using Index =
    boost::container::map<String, Entry, NameLess, allocator<std::pair<const String, Entry>>>;

// Serialises index changes of every container in this process; always taken
// after the MutationGuard, so that commit() never waits on a thread that
// waits for this lock. Recursive: a constructor or destructor run by
// find_or_construct() or destroy() may itself use named objects.
inline std::recursive_mutex& index_mutex() {
  static std::recursive_mutex mu;
  return mu;
}

template <typename T>
uint64_t type_tag() {
  uint64_t h = 14695981039346656037ull;
  for (const char* p = typeid(T).name(); *p != '\0'; p++) {
    h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  }
  return h;
}

inline Status check_name(std::string_view op, std::string_view name) {
  if (name.empty()) return Status::invalid_argument(std::string(op) + ": empty object name");
  return Status();
}

// A read-only open (which uses the hints tracker) changes nothing: finding
// is all it can do, and it may.
inline Status check_tracker(Container& c, std::string_view op, std::string_view name) {
  if (c.tracker_kind() != TrackerKind::kHints || c.read_only()) return Status();
  return Status::not_supported(std::string(op) + " '" + std::string(name) +
                               "': named objects need the uffd or mprotect tracker; the hints "
                               "tracker does not see writes inside Boost containers");
}

// The object of `e` as a T, or kInvalidArgument if it was made as another type.
template <typename T>
Result<T*> typed(const Entry& e, std::string_view name) {
  if (e.size != sizeof(T) || e.type_tag != type_tag<T>()) {
    return Status::invalid_argument("named object '" + std::string(name) + "' is a " +
                                    std::to_string(e.size) +
                                    "-byte object of another type; use the type it was made with");
  }
  return static_cast<T*>(e.object.get());
}

// The index, created (empty) and anchored at kNamesRoot when missing.
inline Result<Index*> index_for_insert(Container& c) {
  if (auto* index = c.root<Index>(kNamesRoot)) return index;
  Result<Index*> index = c.make<Index>(allocator<char>(c));
  if (!index.ok()) return index.status();
  if (Status s = c.set_root(*index, kNamesRoot); !s.ok()) {
    (void)c.free(*index);
    return s;
  }
  return index;
}

// Allocates and constructs a T, then enters it in `index`. Frees what it
// made when the constructor or the insertion throws (std::bad_alloc when an
// allocation inside them fails).
template <typename T, typename... Args>
Result<T*> construct_entry(Container& c, Index& index, std::string_view name, Args&&... args) {
  Result<void*> mem = c.alloc(sizeof(T));
  if (!mem.ok()) return mem.status();
  c.will_write(*mem, sizeof(T));
  T* object;
  try {
    object = new (*mem) T(std::forward<Args>(args)...);
  } catch (...) {
    (void)c.free(*mem);
    throw;
  }
  try {
    String key(name.data(), name.size(), index.get_allocator());
    zero_unused(key);  // moved as a whole into the node: no stack bytes with it
    index.emplace(std::move(key), Entry{object, sizeof(T), type_tag<T>()});
  } catch (...) {
    object->~T();
    (void)c.free(object);
    throw;
  }
  return object;
}

}  // namespace named_detail

// The object named `name`, constructed from `args` in `c` first if there is
// none (the arguments are then unused). The object lives until destroy();
// the returned pointer stays valid while the container is open and the
// object is neither destroyed nor its creation aborted.
// kInvalidArgument: empty name, or the object exists with another type;
// kNoSpace: the container is full (an allocation by T's constructor
// included); kNotSupported: the hints tracker. An exception other than
// std::bad_alloc from T's constructor propagates, after the memory is freed.
template <typename T, typename... Args>
Result<T*> find_or_construct(Container& c, std::string_view name, Args&&... args) {
  PM_TRY(named_detail::check_name("find_or_construct", name));
  // Also when the object exists: what a program does with an object it
  // finds or makes is change it, which under hints was silently lost (a
  // user trial's Boost map: commit() succeeded and reopen showed nothing).
  PM_TRY(named_detail::check_tracker(c, "find_or_construct", name));
  MutationGuard guard(c);
  std::lock_guard<std::recursive_mutex> lock(named_detail::index_mutex());
  if (auto* index = c.root<named_detail::Index>(kNamesRoot)) {
    auto it = index->find(name);
    if (it != index->end()) return named_detail::typed<T>(it->second, name);
  }
  try {
    Result<named_detail::Index*> index = named_detail::index_for_insert(c);
    if (!index.ok()) return index.status().with_context("find_or_construct");
    Result<T*> object =
        named_detail::construct_entry<T>(c, **index, name, std::forward<Args>(args)...);
    if (!object.ok()) return object.status().with_context("find_or_construct");
    return object;
  } catch (const std::bad_alloc&) {
    return Status::no_space("find_or_construct '" + std::string(name) +
                            "': out of space in the container (max_size reached or file system "
                            "full); nothing was created");
  }
}

// The object named `name`. kNotFound if there is none; kInvalidArgument if
// the name is empty or the object was made as another type. The pointer stays
// valid as for find_or_construct().
template <typename T>
Result<T*> find(Container& c, std::string_view name) {
  PM_TRY(named_detail::check_name("find", name));
  MutationGuard guard(c);
  std::lock_guard<std::recursive_mutex> lock(named_detail::index_mutex());
  auto* index = c.root<named_detail::Index>(kNamesRoot);
  auto it = index ? index->find(name) : named_detail::Index::iterator();
  if (index == nullptr || it == index->end()) {
    return Status::not_found("find: no object named '" + std::string(name) + "'");
  }
  return named_detail::typed<T>(it->second, name);
}

// Destroys (~T) and frees the object named `name` and removes the name.
// kNotFound if there is none; kInvalidArgument if the name is empty or the
// object was made as another type (it is left alone); kNotSupported: the
// hints tracker.
template <typename T>
Status destroy(Container& c, std::string_view name) {
  PM_TRY(named_detail::check_name("destroy", name));
  MutationGuard guard(c);
  std::lock_guard<std::recursive_mutex> lock(named_detail::index_mutex());
  auto* index = c.root<named_detail::Index>(kNamesRoot);
  auto it = index ? index->find(name) : named_detail::Index::iterator();
  if (index == nullptr || it == index->end()) {
    return Status::not_found("destroy: no object named '" + std::string(name) + "'");
  }
  Result<T*> object = named_detail::typed<T>(it->second, name);
  if (!object.ok()) return object.status();
  PM_TRY(named_detail::check_tracker(c, "destroy", name));
  index->erase(it);
  (*object)->~T();
  return c.free(*object);
}

}  // namespace pm

#endif  // PM_NAMED_H_
