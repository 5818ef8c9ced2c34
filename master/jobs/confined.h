#pragma once
// Work on one job whose failure must stay with that job: a kj::Exception or std::exception
// thrown while reading it (a damaged stored spec) becomes a message, and the caller
// quarantines that job once it is no longer iterating. One bad job must not take the master
// down (docs/reliability.md).

#include <kj/exception.h>

#include <exception>
#include <string>

namespace yard::master {

// Runs `fn`; returns "" when all went well, else "<what> failed: <why>".
template <typename F>
std::string confined(const char* what, F&& fn) {
  try {
    fn();
    return "";
  } catch (const kj::Exception& e) {
    return std::string(what) + " failed: " + e.getDescription().cStr();
  } catch (const std::exception& e) {
    return std::string(what) + " failed: " + e.what();
  }
}

}  // namespace yard::master
