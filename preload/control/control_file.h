// The control file `laggard ctl` writes into a run directory and every rank's flush thread
// polls (docs/schema.md, "Control file"). One line of text, replaced atomically by the CLI:
//
//   laggard-control 1 seq=7 command=window seconds=30 issued_ns=1790000000000000000
//
// Read with the same care as the writer's output: openat relative to the verified run
// directory, O_NOFOLLOW, a regular file of this user (or root), at most kMaxControlBytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace laggard {

constexpr const char* kControlFileName = "laggard-control";
constexpr size_t kMaxControlBytes = 256;

enum class ControlCommand : uint8_t { pause, resume, window };
const char* control_command_name(ControlCommand c);

struct ControlRequest {
  uint64_t seq = 0;            // the CLI's sequence number: a higher one is a new command
  ControlCommand command = ControlCommand::pause;
  int64_t window_ns = 0;       // command=window: how long capture runs before pausing again
  int64_t issued_ns = 0;       // epoch ns when the CLI wrote it
};

struct ControlParse {
  std::optional<ControlRequest> request;
  std::string error;  // why the text is not a control request ("" when request is set)
};

// Strict: exactly the line above (the trailing newline optional), fields in that order,
// decimal numbers without sign or leading '+', seconds in 1..604800 for window and absent
// otherwise. Anything else is an error, never a partial request.
ControlParse parse_control(std::string_view text);

// What a poll found.
struct ControlRead {
  enum class Status : uint8_t { absent, ok, refused } status = Status::absent;
  std::string text;   // status ok: the file's content (at most kMaxControlBytes)
  std::string error;  // status refused: why (symlink, not a regular file, too big, foreign owner, ...)
};

// Reads `run_dir`/laggard-control without following symlinks and without creating anything.
// A missing directory or file is `absent` (not an error: no command was given yet).
ControlRead read_control_file(const std::string& run_dir);

}  // namespace laggard
