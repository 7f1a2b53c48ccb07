package harness

import (
	"fmt"
	"strings"
)

// ClockEpoch is the wall-clock time at which a harness program with a
// pinned clock starts. pi writes the day into its system prompt ("Current
// date: ..."), so on the real clock the same task renders different
// tokens on different days: demonstrations made today would not be the
// bytes of those made tomorrow, and a policy trained on one day's prompt
// would be evaluated on another's. Noon UTC keeps the day the same in every
// time zone for 11 hours. clockEpochMs is the same instant in Unix
// milliseconds (TestClockEpoch checks they agree).
const ClockEpoch = "2026-01-01T12:00:00Z"

const clockEpochMs = 1767268800000

// clockFile is the preload's name in the config folder (Launch.Files),
// outside any harness's own folder so no program reads it as its config.
const clockFile = "legorl-clock.cjs"

// clockScript is a Node.js preload (node --require) that starts the
// program's wall clock at ClockEpoch: Date.now() and new Date() read it
// plus the time since the program started, so timers, timeouts and
// measured durations behave as on the real clock, and only the calendar is
// pinned. Date with arguments, Date.parse and Date.UTC are the real ones;
// the monotonic clocks (performance.now, process.hrtime) are untouched. It
// pins what the program computes in JavaScript, as libfaketime would in C,
// without changing the program.
func clockScript() []byte {
	return fmt.Appendf(nil, `'use strict';
// Written by legorl: starts this program's wall clock at %s (see harness/clock.go).
(() => {
  const RealDate = Date;
  const offset = %d - RealDate.now();
  const now = () => RealDate.now() + offset;
  function PinnedDate(...args) {
    if (new.target === undefined) return new RealDate(now()).toString();
    return args.length === 0 ? new RealDate(now()) : new RealDate(...args);
  }
  Object.setPrototypeOf(PinnedDate, RealDate);
  PinnedDate.prototype = RealDate.prototype;
  PinnedDate.now = now;
  globalThis.Date = PinnedDate;
})();
`, ClockEpoch, clockEpochMs)
}

// pinClock adds the preload to files and returns the node arguments that
// load it from configDir, where Launch.Files are shown.
func pinClock(files map[string][]byte, configDir string) []string {
	files[clockFile] = clockScript()
	return []string{"--require", configDir + "/" + clockFile}
}

// faketimeLib is Debian's libfaketime (package libfaketime), a preload
// that pins the wall clock of a native program, as pinClock's script does
// for one run by Node.js. OpenCode is a compiled Bun binary that reads no
// Node.js preload and writes the day into its system prompt ("Today's
// date: ..."). Where the library is missing (a sandbox image without it)
// the loader warns and the program runs on the real clock.
const faketimeLib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// fakeClock is the environment that starts the wall clock of the program
// named command (its process name) at ClockEpoch through libfaketime: it
// advances from there with real time, the monotonic clocks are left
// alone, and the commands the program runs (the shell, git, tests) keep
// the real clock.
func fakeClock(command string) []string {
	return []string{"LD_PRELOAD=" + faketimeLib, "FAKETIME=@" + strings.Replace(strings.TrimSuffix(ClockEpoch, "Z"), "T", " ", 1),
		"FAKETIME_ONLY_CMDS=" + command, "FAKETIME_DONT_FAKE_MONOTONIC=1"}
}
