package main

import "testing"

// TestCheckListen: without API keys, serve listens on loopback names only
// (any port); with keys, anywhere.
func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		listen string
		keys   bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"localhost:8080", false, true},
		{"LOCALHOST:8080", false, true},
		{"[::1]:8080", false, true},
		{"127.0.0.2:0", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"[::]:8080", false, false},
		{"192.168.1.5:8080", false, false},
		{"localhost.example:8080", false, false},
		{"127.0.0.1", false, false},
		{"0.0.0.0:8080", true, true},
	} {
		if err := checkListen(tc.listen, tc.keys); (err == nil) != tc.ok {
			t.Errorf("checkListen(%q, keys %v) = %v, want ok %v", tc.listen, tc.keys, err, tc.ok)
		}
	}
}
