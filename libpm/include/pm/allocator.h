// pm::allocator<T>: a standard allocator that allocates in a container, so
// that Boost containers (boost::container::vector, basic_string, map,
// flat_map, deque) can live inside it and be changed with ordinary member
// calls; commit() makes their changes durable and atomic, abort() drops them.
//
//   using Vec = boost::container::vector<int, pm::allocator<int>>;
//   Vec* v = *c->make<Vec>(pm::allocator<int>(*c));  // object and buffer in the container
//   v->push_back(42);
//   (void)c->set_root(v);
//   pm::Status s = c->commit();
//
// Pointers are boost::interprocess::offset_ptr, which Boost.Container follows
// the way it does for Boost.Interprocess segments. The allocator holds an
// offset_ptr to the container's base, never a pointer to the volatile
// pm::Container object, so an allocator stored inside a persistent object
// (as every Boost container stores its own) stays valid after the container
// is closed and reopened; each allocate() finds the open container through
// Container::owner_of(). Copies on the stack work as well.
//
// Errors. allocate() throws std::bad_alloc when the container cannot supply
// the memory (kNoSpace from alloc(), or the container is not open), because
// that is the contract Boost containers rely on to stay unchanged after a
// failed insertion. Callers that must not let exceptions cross their own API
// catch std::bad_alloc at that boundary (named.h does).
//
// Trackers. Boost containers write their nodes and buffers with plain stores
// that nobody announces through will_write(), so they need a tracker that
// sees every write: uffd (the default) or mprotect. The hints tracker is not
// supported: such writes would be neither committed nor aborted.
//
// Pointer-free blocks. Buffers of characters and bytes are allocated as
// data blocks (AllocKind::kData, see pm/container.h): collect() and check()
// never read them as pointers, so text that happens to look like an address
// neither keeps garbage alive nor is reported as an escaping pointer. The
// rule: allocator<T> makes data blocks when pointer_free<T> holds, which it
// does for the character types (char, signed and unsigned char, char8_t,
// char16_t, char32_t, wchar_t) and std::byte. Such an allocator can only be
// asked for arrays of T, and Boost containers allocate everything else
// (map and list nodes, deque block maps, hash buckets) through allocators
// rebound to those types, which are object blocks: a basic_string's
// character buffer and a vector<char>'s elements become data blocks, the
// nodes of a map<string, ...> stay objects. Specialise pointer_free for
// other element types that never hold pointers (vector<double>). Raw
// storage in which objects with pointers are constructed (a byte arena)
// must be scanned: allocate it as an array of another type, say
// allocator<std::max_align_t>, not of bytes. (The kind is not a template
// parameter: allocator<T>'s type is part of the type tags of named objects
// made with it, pm/named.h, and must not change.)
//
// Short strings. basic_string keeps up to 22 characters inside the string
// object (its short-string buffer); the object lives where the string does,
// in an object block (a map node), and only its characters and terminator
// are ever written. A string built on the stack and moved into a persistent
// object brings the stack's stale bytes along in the rest of that buffer,
// which collect() and check() then read as pointers. zero_unused() clears
// them; call it before moving such a string in (pm/named.h does).
//
// Thread safety: an allocator is a value; allocate() and deallocate() may be
// called from any thread (alloc() and free() take the container's
// MutationGuard). The Boost container using it needs its own synchronisation,
// and a thread that modifies it while others may commit holds a MutationGuard.
#ifndef PM_ALLOCATOR_H_
#define PM_ALLOCATOR_H_

#include <boost/interprocess/offset_ptr.hpp>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "pm/container.h"

namespace pm {

// Whether arrays of T hold no pointers; see "Pointer-free blocks" above.
// Specialise (as std::true_type) for other pointer-free element types.
template <typename T>
struct pointer_free
    : std::bool_constant<std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                         std::is_same_v<T, unsigned char> || std::is_same_v<T, char8_t> ||
                         std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t> ||
                         std::is_same_v<T, wchar_t> || std::is_same_v<T, std::byte>> {};

// The kind of the blocks allocator<T> makes.
template <typename T>
inline constexpr AllocKind alloc_kind_for =
    pointer_free<std::remove_cv_t<T>>::value ? AllocKind::kData : AllocKind::kObject;

// Zeroes the characters of `s`'s short-string buffer past its terminator,
// when its characters are inside the string object; does nothing when they
// are in a buffer of their own. For boost::container::basic_string and
// std::basic_string. See "Short strings" above.
template <typename String>
void zero_unused(String& s) noexcept {
  using C = typename String::value_type;
  C* chars = s.data();
  auto at = reinterpret_cast<uintptr_t>(chars);
  auto obj = reinterpret_cast<uintptr_t>(std::addressof(s));
  if (at < obj || at >= obj + sizeof(String)) return;  // a buffer of its own
  std::memset(static_cast<void*>(chars + s.size() + 1), 0, (s.capacity() - s.size()) * sizeof(C));
}

template <typename T>
class allocator {
 public:
  using value_type = T;
  using pointer = boost::interprocess::offset_ptr<T>;
  using const_pointer = boost::interprocess::offset_ptr<const T>;
  using void_pointer = boost::interprocess::offset_ptr<void>;
  using const_void_pointer = boost::interprocess::offset_ptr<const void>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  // A Boost container keeps the allocator of the container it lives in:
  // assigning or swapping with a container object from another container
  // copies elements instead of adopting a foreign allocator.
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::false_type;
  using propagate_on_container_swap = std::false_type;
  using is_always_equal = std::false_type;

  template <typename U>
  struct rebind {
    using other = allocator<U>;
  };

  // Allocates in `c`.
  explicit allocator(Container& c) : base_(static_cast<char*>(c.base())) {}

  template <typename U>
  allocator(const allocator<U>& other) noexcept : base_(other.base()) {}  // NOLINT: rebinding

  allocator(const allocator&) noexcept = default;
  allocator& operator=(const allocator&) noexcept = default;

  // Memory for n objects, aligned for T (alloc() aligns sizes that are
  // multiples of 16 to 16 bytes), in a data block if pointer_free<T>. Throws
  // std::bad_alloc when the container is full (max_size reached, file
  // system full) or not open, and std::bad_array_new_length when
  // n * sizeof(T) overflows.
  pointer allocate(size_type n) {
    static_assert(alignof(T) <= 16, "pm::alloc() aligns to 16 bytes");
    if (n > max_size()) throw std::bad_array_new_length();
    Container* c = container();
    if (c == nullptr) throw std::bad_alloc();
    Result<void*> p = c->alloc(n * sizeof(T), alloc_kind_for<T>);
    if (!p.ok()) throw std::bad_alloc();
    return pointer(static_cast<T*>(*p));
  }

  // Frees memory from allocate(). REQUIRES: the container is open.
  void deallocate(pointer p, size_type) noexcept {
    if (p == nullptr) return;
    Container* c = container();
    assert(c != nullptr && "pm::allocator: deallocate after the container was closed");
    if (c == nullptr) return;
    [[maybe_unused]] Status s = c->free(p.get());
    assert(s.ok() && "pm::allocator: deallocate of a block this container did not allocate");
  }

  size_type max_size() const noexcept { return PTRDIFF_MAX / sizeof(T); }

  // The open container this allocator allocates in, or nullptr.
  Container* container() const { return Container::owner_of(base_.get()); }

  // The container's base address (for rebinding and comparison).
  char* base() const noexcept { return base_.get(); }

  template <typename U>
  bool operator==(const allocator<U>& other) const noexcept {
    return base() == other.base();
  }

 private:
  boost::interprocess::offset_ptr<char> base_;
};

}  // namespace pm

#endif  // PM_ALLOCATOR_H_
