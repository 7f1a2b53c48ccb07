package listen

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		expose   bool
		loopback bool
		every    bool
		err      error
		want     string // in the error, or the String of the address
	}{
		{"127.0.0.1:8000", false, true, false, nil, "127.0.0.1:8000"},
		{"localhost:0", false, true, false, nil, "127.0.0.1:0"},
		{"[::1]:9", false, true, false, nil, "[::1]:9"},
		{"127.3.2.1:1", false, true, false, nil, "127.3.2.1:1"},
		{"10.0.0.2:8000", false, false, false, ErrNotLoopback, "listens on 10.0.0.2, which other machines can reach: add --expose"},
		{"10.0.0.2:8000", true, false, false, nil, "10.0.0.2:8000"},
		{":8000", false, false, true, ErrNotLoopback, "listens on every interface"},
		{":8000", true, false, true, nil, "0.0.0.0:8000"},
		{"0.0.0.0:1", true, false, true, nil, "0.0.0.0:1"},
		{"[::]:1", false, false, true, ErrNotLoopback, "every interface"},
		{"[::ffff:127.0.0.1]:5", false, true, false, nil, "127.0.0.1:5"},
		{"example.com:80", true, false, false, ErrAddress, `host "example.com" is not an IP address`},
		{"127.0.0.1", false, false, false, ErrAddress, "want HOST:PORT"},
		{"127.0.0.1:65536", false, false, false, ErrAddress, "not 0 to 65535"},
		{"127.0.0.1:-1", false, false, false, ErrAddress, "not 0 to 65535"},
		{"[fe80::1%eth0]:1", true, false, false, ErrAddress, "not an IP address"},
	} {
		a, err := Parse(tc.addr, tc.expose, "--listen", "--expose")
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: error %v, want %v with %q", tc.addr, err, tc.err, tc.want)
			}
			continue
		}
		if err != nil || a.Loopback() != tc.loopback || a.Every() != tc.every || a.String() != tc.want {
			t.Errorf("%q: %+v (%v) loopback %v every %v, want %q loopback %v every %v", tc.addr, a, err, a.Loopback(), a.Every(), tc.want, tc.loopback, tc.every)
		}
	}
}

func TestExposure(t *testing.T) {
	lo, _ := Parse("127.0.0.1:0", false, "--listen", "--expose")
	if e := lo.Exposure("jobs", "127.0.0.1:5", "anyone"); e != "" {
		t.Errorf("loopback exposure %q", e)
	}
	ip, _ := Parse("10.1.2.3:0", true, "--listen", "--expose")
	if e := ip.Exposure("the job service", "10.1.2.3:7", "anyone can run code"); e != "legorl: exposed beyond this machine: the job service at 10.1.2.3:7; anyone can run code\n" {
		t.Errorf("exposure %q", e)
	}
	all, _ := Parse(":0", true, "--listen", "--expose")
	if e := all.Exposure("x", "[::]:7", "y"); !strings.Contains(e, "[::]:7 (every interface)") {
		t.Errorf("exposure %q", e)
	}
}

func TestInterface(t *testing.T) {
	for addr, want := range map[string]string{"127.0.0.1:0": "lo", ":0": ""} {
		a, _ := Parse(addr, true, "--listen", "--expose")
		if got, err := a.Interface(); err != nil || got != want {
			t.Errorf("%s: interface %q (%v), want %q", addr, got, err, want)
		}
	}
	// 198.51.100.0/24 is TEST-NET-2 (RFC 5737), for documentation only.
	a, _ := Parse("198.51.100.254:0", true, "--listen", "--expose")
	if _, err := a.Interface(); !errors.Is(err, ErrAddress) || !strings.Contains(err.Error(), "198.51.100.254") {
		t.Errorf("unheld address: %v", err)
	}
}
