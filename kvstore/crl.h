// Cross-referencing logs (CRLs): the record format and one circular log in
// the container's raw region. Format in docs/kvstore.md.
//
// A record is self-validating: magic, its own absolute position (so a record
// left from an earlier lap of the ring never validates at the current one)
// and an XXH3 checksum over all of it. So a put needs one persist barrier:
// after a crash a log holds valid records from its committed head up to the
// first invalid one, which ends it (recovery.h says which of those it
// accepts).
#ifndef KVSTORE_CRL_H_
#define KVSTORE_CRL_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pm/raw_region.h"
#include "pm/status.h"

namespace kv {

using pm::Status;

enum class OpCode : uint8_t { kPut = 1, kRemove = 2 };

inline constexpr uint32_t kRecordMagic = 0x324c5243;  // "CRL2"
// Format 1 (stores written before 2026-11) carried an 8-byte `prev` link in
// every operation header, never read; recovery still reads such records.
inline constexpr uint32_t kRecordMagicV1 = 0x314c5243;  // "CRL1"
// A close mark: a header alone (nops 0), written at the tail of each log
// when its session ends cleanly, after the records are durable (not itself
// persisted: whenever it reaches the file, they already have).
// Recovery never accepts it as a record (Log::read refuses it, as older
// versions do); a mark found past the records recovery accepts shows that
// what lies between was durable and is now damaged (recovery.h).
inline constexpr uint32_t kCloseMagic = 0x534c4343;  // "CCLS"

struct RecordHeader {
  uint32_t magic;
  uint32_t nops;      // operations in the record (a transaction has several)
  uint32_t len;       // bytes of the whole record, a multiple of 8
  uint32_t session;   // store session (open count) that wrote it
  uint64_t pos;       // absolute position in its log: offset = pos % capacity
  uint64_t seq;       // store-wide sequence number; newer updates are larger
  uint64_t checksum;  // XXH3-64 of the record with this field zero, seeded with the log number
};
static_assert(sizeof(RecordHeader) == 40);

// OpHeader::flags.
// A put whose key the store's working index held when it was logged: its
// previous version was live and applied (StoreImpl::update). Ordered reads
// need not take such a key from the log (PendingKeys), but only from records
// of the session that wrote them: a crash drops what was applied and not
// committed. Format 2 records only; readers of older versions ignore it.
inline constexpr uint8_t kOpKeyIndexed = 1;
// On every op of a record appended with a persist of its own (kSync on
// pmem, LogWriter::append): the log's earlier records were persistent
// before this one was written. So a valid such record past an invalid one
// proves the invalid one damaged, not torn by a crash (look_beyond).
inline constexpr uint8_t kOpInOrder = 2;

struct OpHeader {
  uint8_t op;  // OpCode
  uint8_t flags;
  uint8_t pad[2];
  uint32_t klen;
  uint32_t vlen;
  uint32_t pad2;
};
static_assert(sizeof(OpHeader) == 16);
inline constexpr size_t kOpHeaderV1 = 24;  // OpHeader, then prev (format 1)

// Where a record is: log number and absolute position, never 0.
using LogRef = uint64_t;
inline LogRef make_ref(uint32_t log, uint64_t pos) { return (uint64_t{log} + 1) << 48 | pos; }
inline uint32_t ref_log(LogRef r) { return static_cast<uint32_t>((r >> 48) - 1); }
inline uint64_t ref_pos(LogRef r) { return r & ((1ull << 48) - 1); }

struct Op {
  OpCode op;
  std::string_view key, value;
  bool key_indexed = false;  // kOpKeyIndexed
};

inline uint64_t record_size(const std::vector<Op>& ops) {
  uint64_t n = sizeof(RecordHeader);
  for (const Op& o : ops) n += sizeof(OpHeader) + o.key.size() + o.value.size();
  return (n + 7) & ~uint64_t{7};
}

// The checksum of record bytes [rec, rec+n) in log `log`.
// REQUIRES: the record's checksum field reads as zero.
uint64_t record_checksum(uint32_t log, const std::byte* rec, size_t n);

// Builds the record into *buf (resized to record_size(ops)).
// `in_order`: appended with a persist of its own (kOpInOrder).
void encode_record(uint32_t log, uint64_t pos, uint64_t seq, uint32_t session,
                   const std::vector<Op>& ops, std::vector<std::byte>* buf,
                   bool in_order = false);
// The close mark of `session` for log `log` at pos.
RecordHeader close_mark(uint32_t log, uint64_t pos, uint32_t session);

// A record read back and validated; ops point into `bytes`.
struct Record {
  RecordHeader header{};
  bool in_order = false;  // kOpInOrder
  std::vector<std::byte> bytes;
  std::vector<Op> ops;
};

struct Limits {
  uint32_t max_key = 0, max_value = 0;
  uint64_t max_record = 0;
};

// One circular log: [raw_off, raw_off + capacity) of the raw region.
// Thread safety: as the raw region (disjoint ranges concurrently).
class Log {
 public:
  Log(pm::RawRegion* raw, uint32_t index, uint64_t raw_off, uint64_t capacity)
      : raw_(raw), index_(index), raw_off_(raw_off), cap_(capacity) {}

  uint32_t index() const { return index_; }
  uint64_t capacity() const { return cap_; }

  // Copies a record to absolute position pos (wrapping at the end of the ring).
  // REQUIRES: n <= capacity().
  Status write(uint64_t pos, const std::byte* src, size_t n);
  // Makes [pos, pos+n) durable (the whole ring when n exceeds it).
  Status persist(uint64_t pos, uint64_t n);
  // Reads and validates the record at pos: false when there is none (end
  // of the log, a torn record, or one from an earlier lap).
  bool read(uint64_t pos, const Limits& limits, Record* out) const;
  // Seq of the record at pos, if one validates there (header only).
  bool peek_seq(uint64_t pos, uint64_t* seq) const;
  // True when a valid close mark of `session` is at pos.
  bool is_close_mark(uint64_t pos, uint32_t session) const;
  // Copies [pos, pos+n) of the ring. REQUIRES: n <= capacity().
  Status read_bytes(uint64_t pos, void* dst, size_t n) const;

 private:
  pm::RawRegion* raw_;
  uint32_t index_;
  uint64_t raw_off_;
  uint64_t cap_;
};

}  // namespace kv

#endif  // KVSTORE_CRL_H_
