#include "master/store/changeset.h"

#include <cstring>

namespace yard::store {
namespace {

constexpr uint32_t kMagic = 0x59434853;  // "YCHS"

void put32(std::string& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<char>(v >> (8 * b) & 0xff));
}
void put64(std::string& out, uint64_t v) {
  for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>(v >> (8 * b) & 0xff));
}
void putText(std::string& out, const std::string& s) {
  put32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool u8(uint8_t& v) {
    if (in_.size() < 1) return false;
    v = static_cast<uint8_t>(in_[0]);
    in_.remove_prefix(1);
    return true;
  }
  bool u32(uint32_t& v) {
    if (in_.size() < 4) return false;
    v = 0;
    for (int b = 0; b < 4; ++b) v |= uint32_t(static_cast<uint8_t>(in_[size_t(b)])) << (8 * b);
    in_.remove_prefix(4);
    return true;
  }
  bool u64(uint64_t& v) {
    if (in_.size() < 8) return false;
    v = 0;
    for (int b = 0; b < 8; ++b) v |= uint64_t(static_cast<uint8_t>(in_[size_t(b)])) << (8 * b);
    in_.remove_prefix(8);
    return true;
  }
  bool text(std::string& s) {
    uint32_t n = 0;
    if (!u32(n) || in_.size() < n) return false;
    s.assign(in_.substr(0, n));
    in_.remove_prefix(n);
    return true;
  }
  bool empty() const { return in_.empty(); }
  size_t left() const { return in_.size(); }

 private:
  std::string_view in_;
};

}  // namespace

std::string encodeChangeset(const Changeset& changes) {
  std::string out;
  put32(out, kMagic);
  put32(out, static_cast<uint32_t>(changes.size()));
  for (const CapturedStatement& s : changes) {
    putText(out, s.sql);
    out.push_back(s.ok ? 1 : 0);
    put64(out, static_cast<uint64_t>(s.changes));
    put64(out, static_cast<uint64_t>(s.rowid));
    put32(out, static_cast<uint32_t>(s.params.size()));
    for (const CapturedValue& v : s.params) {
      out.push_back(static_cast<char>(v.kind));
      switch (v.kind) {
        case CapturedValue::Null: break;
        case CapturedValue::Int: put64(out, static_cast<uint64_t>(v.i)); break;
        case CapturedValue::Real: {
          uint64_t bits = 0;
          std::memcpy(&bits, &v.r, sizeof bits);
          put64(out, bits);
          break;
        }
        case CapturedValue::Text:
        case CapturedValue::Blob: putText(out, v.s); break;
      }
    }
  }
  return out;
}

Result<Changeset> decodeChangeset(std::string_view bytes) {
  using R = Result<Changeset>;
  Reader in(bytes);
  uint32_t magic = 0, count = 0;
  if (!in.u32(magic) || magic != kMagic) return R::fail("not a store changeset (bad magic)");
  if (!in.u32(count)) return R::fail("changeset truncated in its header");
  Changeset out;
  for (uint32_t i = 0; i < count; ++i) {
    std::string at = "changeset statement " + std::to_string(i + 1) + " of " + std::to_string(count);
    CapturedStatement s;
    uint8_t ok = 0;
    uint32_t params = 0;
    uint64_t changes = 0, rowid = 0;
    if (!in.text(s.sql) || !in.u8(ok) || ok > 1 || !in.u64(changes) || !in.u64(rowid) || !in.u32(params))
      return R::fail(at + ": truncated or malformed");
    s.changes = static_cast<int64_t>(changes);
    s.rowid = static_cast<int64_t>(rowid);
    if (params > in.left()) return R::fail(at + ": claims " + std::to_string(params) + " values");
    s.ok = ok == 1;
    for (uint32_t p = 0; p < params; ++p) {
      CapturedValue v;
      uint8_t kind = 0;
      if (!in.u8(kind) || kind > CapturedValue::Blob) return R::fail(at + ": value " + std::to_string(p + 1) + " has no known kind");
      v.kind = static_cast<CapturedValue::Kind>(kind);
      bool read = true;
      uint64_t bits = 0;
      switch (v.kind) {
        case CapturedValue::Null: break;
        case CapturedValue::Int:
          read = in.u64(bits);
          v.i = static_cast<int64_t>(bits);
          break;
        case CapturedValue::Real:
          read = in.u64(bits);
          std::memcpy(&v.r, &bits, sizeof bits);
          break;
        case CapturedValue::Text:
        case CapturedValue::Blob: read = in.text(v.s); break;
      }
      if (!read) return R::fail(at + ": value " + std::to_string(p + 1) + " truncated");
      s.params.push_back(std::move(v));
    }
    out.push_back(std::move(s));
  }
  if (!in.empty()) return R::fail("changeset has " + std::to_string(in.left()) + " bytes after its last statement");
  return R::ok(std::move(out));
}

}  // namespace yard::store
