// Package listen decides where a legorl server may listen: the job server,
// the worker pool and `legorl serve`. A loopback address needs nothing; any
// other address (a machine's own IP, or every interface) needs the
// operator's explicit consent, because what listens there answers anyone
// who reaches it: a job server runs the code of the jobs it is given, a
// worker pool runs the bundles of any job server that calls it, and
// `legorl serve` generates for anyone. Exposure says in one line what a
// server exposes, for it to print when it starts.
package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// ErrNotLoopback is returned by Parse for an address beyond loopback when
// the caller did not pass expose.
var ErrNotLoopback = errors.New("listen: not a loopback address")

// ErrAddress is returned by Parse for an address it cannot use.
var ErrAddress = errors.New("listen: bad address")

// Address is a parsed listen address.
type Address struct {
	// Host is the address as given ("127.0.0.1", "localhost", "10.0.0.2",
	// "" or "0.0.0.0" for every interface).
	Host string
	// IP is the address; unspecified (0.0.0.0 or ::) for every interface.
	IP netip.Addr
	// Port is the port; 0: any free one.
	Port int
}

// Loopback reports whether only this machine can reach the address.
func (a Address) Loopback() bool { return a.IP.IsLoopback() }

// Every reports whether the address is every interface (0.0.0.0, ::, or
// an empty host).
func (a Address) Every() bool { return a.IP.IsUnspecified() }

// String is host:port, with the port as given (0: any).
func (a Address) String() string {
	return net.JoinHostPort(a.IP.String(), strconv.Itoa(a.Port))
}

// Parse checks a listen address "HOST:PORT". HOST is an IP address,
// "localhost" (127.0.0.1), or empty for every interface; PORT is 0 to
// 65535 (0: any free one). An address other than loopback is refused with
// ErrNotLoopback unless expose is true; flag names the flag that sets it
// and the flag that consents, for the error ("--listen" and "--expose").
func Parse(addr string, expose bool, flag, consent string) (Address, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return Address{}, fmt.Errorf("%w: %s %q: want HOST:PORT (127.0.0.1:8000)", ErrAddress, flag, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return Address{}, fmt.Errorf("%w: %s %q: port %q is not 0 to 65535", ErrAddress, flag, addr, port)
	}
	var ip netip.Addr
	switch host {
	case "localhost":
		ip = netip.MustParseAddr("127.0.0.1")
	case "":
		ip = netip.IPv4Unspecified()
	default:
		if ip, err = netip.ParseAddr(host); err != nil || ip.Zone() != "" {
			return Address{}, fmt.Errorf("%w: %s %q: host %q is not an IP address, localhost, or empty (every interface)", ErrAddress, flag, addr, host)
		}
		ip = ip.Unmap()
	}
	a := Address{Host: host, IP: ip, Port: p}
	if !a.Loopback() && !expose {
		where := "every interface"
		if !a.Every() {
			where = ip.String()
		}
		return Address{}, fmt.Errorf("%w: %s %s listens on %s, which other machines can reach: add %s to mean it", ErrNotLoopback, flag, addr, where, consent)
	}
	return a, nil
}

// Exposure is the line a server prints to stderr when it listens beyond
// loopback, newline included: what is exposed (what), where (at, the
// address it listens on), and who can use it (who). It is empty for a
// loopback address.
func (a Address) Exposure(what, at, who string) string {
	if a.Loopback() {
		return ""
	}
	if a.Every() {
		at += " (every interface)"
	}
	return fmt.Sprintf("legorl: exposed beyond this machine: %s at %s; %s\n", what, at, who)
}

// Interface returns the name of the network interface that holds the
// address's IP ("" for every interface, "lo" for loopback), or an error
// if no interface of this machine holds it.
func (a Address) Interface() (string, error) {
	if a.Every() {
		return "", nil
	}
	if a.Loopback() {
		return "lo", nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("listen: interfaces: %w", err)
	}
	for _, fi := range ifs {
		addrs, err := fi.Addrs()
		if err != nil {
			continue
		}
		for _, ad := range addrs {
			if pfx, err := netip.ParsePrefix(ad.String()); err == nil && pfx.Addr().Unmap() == a.IP {
				return fi.Name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no interface of this machine has address %s", ErrAddress, a.IP)
}
