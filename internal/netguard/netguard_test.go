package netguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestPublic(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"2a00:1450:4001:80b::200e", true},
		{"64:ff9b::5db8:d822", true}, // NAT64 of 93.184.216.34
		{"::ffff:93.184.216.34", true},
		{"198.17.255.255", true}, // just below 198.18.0.0/15
		{"198.20.0.0", true},     // just above it
		{"223.255.255.255", true},
		{"2001:200::1", true}, // just above 2001::/23
		{"2003::1", true},     // just above 2002::/16

		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"10.1.2.3", false},
		{"100.64.0.1", false},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		{"172.16.0.1", false},
		{"192.0.0.1", false},
		{"192.0.0.170", false},
		{"192.0.2.1", false},
		{"192.88.99.1", false},
		{"192.168.1.1", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		{"198.51.100.7", false},
		{"203.0.113.9", false},
		{"224.0.0.1", false},
		{"240.0.0.1", false},
		{"255.255.255.255", false},

		{"::", false},
		{"::1", false},
		{"::a9fe:a9fe", false},          // IPv4-compatible
		{"::5db8:d822", false},          // IPv4-compatible of a public address: deprecated, refused whole
		{"::ffff:127.0.0.1", false},     // IPv4-mapped
		{"::ffff:10.0.0.1", false},      // IPv4-mapped
		{"64:ff9b::a9fe:a9fe", false},   // NAT64 of the metadata address
		{"64:ff9b::7f00:1", false},      // NAT64 of loopback
		{"64:ff9b:1::5db8:d822", false}, // local-use NAT64: its embedding is the network's own
		{"100::1", false},               // discard-only
		{"2001::1", false},              // Teredo
		{"2001:0:4136:e378::", false},   // Teredo
		{"2001:2::1", false},            // benchmarking
		{"2001:db8::1", false},          // documentation
		{"2002:5db8:d822::1", false},    // 6to4 of a public address: refused whole
		{"2002:a9fe:a9fe::1", false},    // 6to4 of the metadata address
		{"2620:4f:8000::1", false},      // AS112
		{"3fff::1", false},              // documentation
		{"5f00::1", false},              // SRv6 SIDs
		{"fc00::1", false},              // unique local
		{"fd00::1", false},              // unique local
		{"fe80::1", false},              // link-local
		{"ff02::1", false},              // multicast
		{"4000::1", false},              // unallocated
		{"2606:4700::1111%eth0", false}, // a zone: not a global address
	} {
		if got := Public(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Public(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestControl(t *testing.T) {
	for address, want := range map[string]error{
		"93.184.216.34:443":        nil,
		"[64:ff9b::5db8:d822]:443": nil,
		"[64:ff9b::a9fe:a9fe]:80":  ErrRefused,
		"[2002:7f00:1::]:443":      ErrRefused,
		"127.0.0.1:443":            ErrRefused,
		"not an address":           ErrRefused,
	} {
		if err := Control("tcp", address, nil); !errors.Is(err, want) {
			t.Errorf("Control(%s) = %v, want %v", address, err, want)
		}
	}
}

// embeddings returns the IPv6 forms that carry v4: IPv4-mapped and
// IPv4-compatible (RFC 4291), NAT64 with the well-known prefix and with
// the local-use prefix at every RFC 6052 prefix length, 6to4 (RFC 3056),
// and Teredo (RFC 4380) with v4 as server and as (obfuscated) client.
func embeddings(v4 netip.Addr) map[string]netip.Addr {
	b := v4.As4()
	u := binary.BigEndian.Uint32(b[:])
	with := func(base string, at int) netip.Addr {
		a := netip.MustParseAddr(base).As16()
		// RFC 6052 §2.2: bits 64-71 (the "u" octet) stay zero.
		for i, j := 0, at; i < 4; j++ {
			if j == 8 {
				continue
			}
			a[j] = b[i]
			i++
		}
		return netip.AddrFrom16(a)
	}
	forms := map[string]netip.Addr{
		"mapped":        netip.AddrFrom16([16]byte{10: 0xff, 11: 0xff, 12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
		"compatible":    netip.AddrFrom16([16]byte{12: b[0], 13: b[1], 14: b[2], 15: b[3]}),
		"nat64":         with("64:ff9b::", 12),
		"6to4":          with("2002::", 2),
		"teredo server": with("2001::", 4),
		"teredo client": teredoClient(u),
	}
	// The local-use prefix at /32, /40, /48, /56, /64 and /96.
	for _, at := range []int{4, 5, 6, 7, 9, 12} {
		forms[fmt.Sprintf("nat64 local (from byte %d)", at)] = with("64:ff9b:1::", at)
	}
	return forms
}

// teredoClient is a Teredo address whose obfuscated client address
// (RFC 4380 §4: the last 32 bits, inverted) is u.
func teredoClient(u uint32) netip.Addr {
	a := netip.MustParseAddr("2001:0:4136:e378:8000:63bf::").As16()
	binary.BigEndian.PutUint32(a[12:], ^u)
	return netip.AddrFrom16(a)
}

// FuzzEmbeddedIPv4 is the property the review asked for: every IPv6 form
// that embeds a refused IPv4 address is refused too; and NAT64 and
// IPv4-mapped forms (which reach the embedded address itself) are allowed
// exactly when it is.
func FuzzEmbeddedIPv4(f *testing.F) {
	for _, s := range []string{"169.254.169.254", "127.0.0.1", "10.0.0.1", "100.64.0.1", "198.18.0.1",
		"192.0.0.8", "240.0.0.1", "0.0.0.0", "255.255.255.255", "192.0.2.1", "93.184.216.34", "8.8.8.8"} {
		f.Add(netip.MustParseAddr(s).AsSlice())
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) != 4 {
			return
		}
		v4 := netip.AddrFrom4([4]byte(raw))
		public := Public(v4)
		for name, a := range embeddings(v4) {
			got := Public(a)
			switch {
			case !public && got:
				t.Errorf("%s is refused but its %s form %s is allowed", v4, name, a)
			case public && got != (name == "mapped" || name == "nat64"):
				t.Errorf("Public(%s form %s of public %s) = %v", name, a, v4, got)
			}
		}
	})
}

// TestEmbeddedIPv4Registry runs the property over the first, last and a
// middle address of every refused IPv4 block.
func TestEmbeddedIPv4Registry(t *testing.T) {
	for _, p := range ipv4Special {
		first := p.Masked().Addr()
		last := lastOf(p)
		for _, v4 := range []netip.Addr{first, last, mid(first, last)} {
			if Public(v4) {
				t.Fatalf("Public(%s) in %s", v4, p)
			}
			for name, a := range embeddings(v4) {
				if Public(a) {
					t.Errorf("%s form %s of %s (in %s) is allowed", name, a, v4, p)
				}
			}
		}
	}
}

func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	u := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

func mid(first, last netip.Addr) netip.Addr {
	f, l := first.As4(), last.As4()
	u := binary.BigEndian.Uint32(f[:])/2 + binary.BigEndian.Uint32(l[:])/2
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}
