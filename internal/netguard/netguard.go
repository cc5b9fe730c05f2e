// Package netguard decides which addresses the gateway may connect to on a
// client's behalf (remote attachment fetches): global unicast addresses
// only, with every block of IANA's special-purpose address registries
// subtracted, and the IPv4 address inside an IPv6 transition address
// checked as IPv4 or the transition form refused whole.
//
// The check belongs at dial time (Control, as a net.Dialer's Control), on
// the address actually connected to, so that DNS rebinding cannot get
// around it.
package netguard

import (
	"errors"
	"net/netip"
	"syscall"
)

// ErrRefused is the error of a connection Control refused because of its
// address.
var ErrRefused = errors.New("address not allowed")

// Public reports whether a is an address the gateway may connect to on a
// client's behalf. IPv4 (and IPv4-mapped IPv6) addresses must be global
// unicast outside ipv4Special. IPv6 addresses must be in 2000::/3, the
// only block IANA allocates global unicast addresses from (this leaves out
// ::/96 IPv4-compatible, 64:ff9b::/96 and 64:ff9b:1::/48 NAT64, 100::/64,
// 5f00::/16, fc00::/7, fe80::/10 and multicast), and outside ipv6Special
// (2001::/32 Teredo, 2002::/16 6to4, documentation…). The one transition
// form allowed is NAT64's well-known prefix 64:ff9b::/96 (RFC 6052), whose
// embedded IPv4 address is checked instead: on an IPv6-only network it is
// how the public IPv4 internet is reached, and RFC 6052 §3.1 forbids it
// for non-global IPv4 addresses anyway.
func Public(a netip.Addr) bool {
	if a.Is4In6() {
		a = a.Unmap()
	}
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case !a.IsValid() || !a.IsGlobalUnicast():
		return false
	case a.Is4():
		return !inAny(ipv4Special, a)
	default:
		return globalUnicast6.Contains(a) && !inAny(ipv6Special, a)
	}
}

// Control is a net.Dialer Control function that refuses, with ErrRefused,
// a connection to an address Public does not allow.
func Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !Public(ap.Addr()) {
		return ErrRefused
	}
	return nil
}

func inAny(blocks []netip.Prefix, a netip.Addr) bool {
	for _, p := range blocks {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	// nat64 is the well-known prefix of RFC 6052, 64:ff9b::/96.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// globalUnicast6 is the IPv6 global unicast space (RFC 4291 §2.4,
	// IANA's IPv6 Address Space registry): every other /3 is reserved or
	// special-purpose.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// ipv4Special is IANA's IPv4 Special-Purpose Address Registry,
// https://www.iana.org/assignments/iana-ipv4-special-registry/ (as of
// 2025-03), every block: the globally reachable ones too (anycast relays,
// AS112, AMT), since none of them serves files. Loopback (127.0.0.0/8),
// link-local (169.254.0.0/16, cloud metadata among it), 255.255.255.255 and
// multicast (224.0.0.0/4, its own registry) are not global unicast at all
// (netip.Addr.IsGlobalUnicast), listed here all the same for the reader.
var ipv4Special = prefixes(
	"0.0.0.0/8",          // "this network" (RFC 791); 0.0.0.0/32 "this host"
	"10.0.0.0/8",         // private-use (RFC 1918)
	"100.64.0.0/10",      // shared address space, carrier-grade NAT (RFC 6598)
	"127.0.0.0/8",        // loopback (RFC 1122)
	"169.254.0.0/16",     // link-local (RFC 3927)
	"172.16.0.0/12",      // private-use (RFC 1918)
	"192.0.0.0/24",       // IETF protocol assignments (RFC 6890): DS-Lite, NAT64 discovery, PCP/TURN anycast…
	"192.0.2.0/24",       // documentation, TEST-NET-1 (RFC 5737)
	"192.31.196.0/24",    // AS112-v4 (RFC 7535)
	"192.52.193.0/24",    // AMT (RFC 7450)
	"192.88.99.0/24",     // deprecated 6to4 relay anycast (RFC 7526)
	"192.168.0.0/16",     // private-use (RFC 1918)
	"192.175.48.0/24",    // direct delegation AS112 service (RFC 7534)
	"198.18.0.0/15",      // benchmarking (RFC 2544)
	"198.51.100.0/24",    // documentation, TEST-NET-2 (RFC 5737)
	"203.0.113.0/24",     // documentation, TEST-NET-3 (RFC 5737)
	"224.0.0.0/4",        // multicast (RFC 5771)
	"240.0.0.0/4",        // reserved (RFC 1112)
	"255.255.255.255/32", // limited broadcast (RFC 919)
)

// ipv6Special is IANA's IPv6 Special-Purpose Address Registry,
// https://www.iana.org/assignments/iana-ipv6-special-registry/ (as of
// 2025-03), the blocks inside 2000::/3 (Public refuses everything outside
// it: ::1, ::, ::ffff:0:0/96, 64:ff9b:1::/48, 100::/64, 100:0:0:1::/64,
// 5f00::/16, fc00::/7, fe80::/10), every block: the globally reachable ones
// in 2001::/23 too (anycast, AMT, AS112, ORCHIDv2, drone remote ID).
var ipv6Special = prefixes(
	"2001::/23",         // IETF protocol assignments (RFC 2928), Teredo 2001::/32 (RFC 4380) among them
	"2001:db8::/32",     // documentation (RFC 3849)
	"2002::/16",         // 6to4 (RFC 3056): an IPv4 address inside, relayed anywhere
	"2620:4f:8000::/48", // direct delegation AS112 service (RFC 7534)
	"3fff::/20",         // documentation (RFC 9637)
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}
