#include "kvstore/crl.h"

#include <xxhash.h>

#include <cstring>

namespace kv {

uint64_t record_checksum(uint32_t log, const std::byte* rec, size_t n) {
  return XXH3_64bits_withSeed(rec, n, uint64_t{log} * 0x9E3779B97F4A7C15ull + 1);
}

void encode_record(uint32_t log, uint64_t pos, uint64_t seq, uint32_t session,
                   const std::vector<Op>& ops, std::vector<std::byte>* buf, bool in_order) {
  const uint64_t n = record_size(ops);
  buf->assign(n, std::byte{0});
  std::byte* p = buf->data();
  RecordHeader h{};
  h.magic = kRecordMagic;
  h.nops = static_cast<uint32_t>(ops.size());
  h.len = static_cast<uint32_t>(n);
  h.pos = pos;
  h.seq = seq;
  h.session = session;
  size_t at = sizeof h;
  for (const Op& o : ops) {
    OpHeader oh{};
    oh.op = static_cast<uint8_t>(o.op);
    oh.flags = static_cast<uint8_t>((o.key_indexed ? kOpKeyIndexed : 0) |
                                    (in_order ? kOpInOrder : 0));
    oh.klen = static_cast<uint32_t>(o.key.size());
    oh.vlen = static_cast<uint32_t>(o.value.size());
    std::memcpy(p + at, &oh, sizeof oh);
    at += sizeof oh;
    std::memcpy(p + at, o.key.data(), o.key.size());
    at += o.key.size();
    if (!o.value.empty()) std::memcpy(p + at, o.value.data(), o.value.size());  // data() may be null
    at += o.value.size();
  }
  std::memcpy(p, &h, sizeof h);
  h.checksum = record_checksum(log, p, n);
  std::memcpy(p + offsetof(RecordHeader, checksum), &h.checksum, 8);
}

RecordHeader close_mark(uint32_t log, uint64_t pos, uint32_t session) {
  RecordHeader h{};
  h.magic = kCloseMagic;
  h.len = sizeof h;
  h.pos = pos;
  h.session = session;
  h.checksum = record_checksum(log, reinterpret_cast<const std::byte*>(&h), sizeof h);
  return h;
}

bool Log::is_close_mark(uint64_t pos, uint32_t session) const {
  RecordHeader h;
  if (!read_bytes(pos, &h, sizeof h).ok()) return false;
  if (h.magic != kCloseMagic || h.pos != pos || h.session != session) return false;
  const RecordHeader want = close_mark(index_, pos, session);
  return std::memcmp(&h, &want, sizeof h) == 0;
}

Status Log::write(uint64_t pos, const std::byte* src, size_t n) {
  const uint64_t off = pos % cap_;
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, cap_ - off));
  PM_TRY(raw_->write(raw_off_ + off, src, first));
  if (first < n) PM_TRY(raw_->write(raw_off_, src + first, n - first));
  return Status();
}

Status Log::persist(uint64_t pos, uint64_t n) {
  if (n >= cap_) return raw_->persist(raw_off_, cap_);
  const uint64_t off = pos % cap_;
  const uint64_t first = std::min(n, cap_ - off);
  PM_TRY(raw_->persist(raw_off_ + off, first));
  if (first < n) PM_TRY(raw_->persist(raw_off_, n - first));
  return Status();
}

Status Log::read_bytes(uint64_t pos, void* dst, size_t n) const {
  const uint64_t off = pos % cap_;
  const size_t first = static_cast<size_t>(std::min<uint64_t>(n, cap_ - off));
  auto* d = static_cast<std::byte*>(dst);
  PM_TRY(raw_->read(raw_off_ + off, d, first));
  if (first < n) PM_TRY(raw_->read(raw_off_, d + first, n - first));
  return Status();
}

bool Log::peek_seq(uint64_t pos, uint64_t* seq) const {
  RecordHeader h;
  if (!read_bytes(pos, &h, sizeof h).ok()) return false;
  if ((h.magic != kRecordMagic && h.magic != kRecordMagicV1) || h.pos != pos) return false;
  *seq = h.seq;
  return true;
}

bool Log::read(uint64_t pos, const Limits& limits, Record* out) const {
  RecordHeader& h = out->header;
  if (!read_bytes(pos, &h, sizeof h).ok()) return false;
  if ((h.magic != kRecordMagic && h.magic != kRecordMagicV1) || h.pos != pos || h.len % 8 != 0 ||
      h.nops == 0 || h.len < sizeof h + sizeof(OpHeader) || h.len > limits.max_record ||
      h.len > cap_ || h.session == 0) {
    return false;
  }
  const size_t op_header = h.magic == kRecordMagic ? sizeof(OpHeader) : kOpHeaderV1;
  out->bytes.resize(h.len);
  if (!read_bytes(pos, out->bytes.data(), h.len).ok()) return false;
  std::memset(out->bytes.data() + offsetof(RecordHeader, checksum), 0, 8);
  if (record_checksum(index_, out->bytes.data(), h.len) != h.checksum) return false;
  // A valid checksum over bad lengths is still refused: a record must parse.
  out->ops.clear();
  const std::byte* p = out->bytes.data();
  size_t at = sizeof h;
  for (uint32_t i = 0; i < h.nops; i++) {
    OpHeader oh;
    if (h.len - at < op_header) return false;
    std::memcpy(&oh, p + at, sizeof oh);
    at += op_header;
    if ((oh.op != 1 && oh.op != 2) || oh.klen == 0 || oh.klen > limits.max_key ||
        oh.vlen > limits.max_value || uint64_t{oh.klen} + oh.vlen > h.len - at) {
      return false;
    }
    Op o;
    o.op = static_cast<OpCode>(oh.op);
    o.key_indexed = h.magic == kRecordMagic && (oh.flags & kOpKeyIndexed) != 0;
    if (i == 0) out->in_order = h.magic == kRecordMagic && (oh.flags & kOpInOrder) != 0;
    o.key = std::string_view(reinterpret_cast<const char*>(p + at), oh.klen);
    o.value = std::string_view(reinterpret_cast<const char*>(p + at + oh.klen), oh.vlen);
    at += oh.klen + oh.vlen;
    out->ops.push_back(o);
  }
  return h.len - at < 8;
}

}  // namespace kv
