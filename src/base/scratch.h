// Scratch<T>: the working buffers of the forward pass, without the heap in the steady state.
//
// A decode step needs the same few thousand buffers every time (activations, prepared rows,
// expert row lists), each for a moment. Taking them from malloc costs a lock-free but not free
// call each and, worse, lets glibc hand pages back and fault them in again. So every thread keeps
// a cache of freed buffers by power-of-two size class: a Scratch takes one of its class when the
// cache has one and returns it when it dies. After the first step of a shape every buffer comes
// from the cache (docs/KERNELS.md "Threads and memory"). Unlike a stack arena, buffers may be
// created and released in any order and may die on another thread than the one that made them.
//
// Buffers are 64-byte aligned (vector loads). Only for trivially copyable element types; like
// std::vector, new elements are value-initialised (zero).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace cedar {

namespace scratch {
// A buffer of at least `bytes` (> 0) bytes from this thread's cache or the heap; *capacity gets
// its usable size. Throws std::bad_alloc.
void* acquire(size_t bytes, size_t* capacity);
// Gives back a buffer acquire() returned, with its capacity (to this thread's cache).
void release(void* p, size_t capacity) noexcept;
// Buffers acquired from the heap by this thread so far (tests: the steady state takes none).
size_t heap_acquires() noexcept;
}  // namespace scratch

template <class T>
class Scratch {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "Scratch holds plain data");

 public:
  Scratch() = default;
  explicit Scratch(size_t n) { resize(n); }
  Scratch(size_t n, const T& v) { assign(n, v); }
  Scratch(std::initializer_list<T> v) {
    reserve(v.size());
    for (const T& x : v) push_back(x);
  }
  ~Scratch() { free_(); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  Scratch(Scratch&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        n_(std::exchange(o.n_, 0)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  Scratch& operator=(Scratch&& o) noexcept {
    if (this != &o) {
      free_();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& back() { return p_[n_ - 1]; }

  size_t capacity() const { return bytes_ / sizeof(T); }
  void clear() { n_ = 0; }
  void reserve(size_t n) {
    if (n <= capacity()) return;
    size_t bytes = 0;
    T* q = static_cast<T*>(scratch::acquire(n * sizeof(T), &bytes));
    if (n_) std::memcpy(q, p_, n_ * sizeof(T));
    const size_t keep = n_;
    free_();
    p_ = q;
    n_ = keep;
    bytes_ = bytes;
  }
  // keeps the first min(n, size()) elements; new ones are zero
  void resize(size_t n) {
    reserve(n);
    if (n > n_) std::fill(p_ + n_, p_ + n, T{});
    n_ = n;
  }
  // like resize, but new elements are left unset: for buffers the caller writes in full
  void resize_for_overwrite(size_t n) {
    reserve(n);
    n_ = n;
  }
  void assign(size_t n, const T& v) {
    n_ = 0;
    reserve(n);
    std::fill(p_, p_ + n, v);
    n_ = n;
  }
  void push_back(const T& v) {
    if (n_ == capacity()) reserve(std::max<size_t>(16, 2 * n_));
    p_[n_++] = v;
  }

 private:
  void free_() {
    if (p_) scratch::release(p_, bytes_);
    p_ = nullptr;
    n_ = bytes_ = 0;
  }

  T* p_ = nullptr;
  size_t n_ = 0, bytes_ = 0;  // bytes_: the buffer's capacity as acquire() gave it
};

}  // namespace cedar
