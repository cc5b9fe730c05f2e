package config

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"time"
)

// Replica names this gateway process among the replicas that share one
// database, and sets how long what it holds there lasts without it.
type Replica struct {
	// ID names the replica in session leases, submission claims, /readyz,
	// /v1/admin/rules and the turn audit records; default hostname-pid.
	// Replicas on one database must have different ids.
	ID string `yaml:"id"`
	// LeaseTTL is how long a session's turn lease, a submission's claim
	// and a waiting request's place in a session's queue last unless
	// renewed (default 15s). The holder renews them every third of it
	// while the turn runs (or the request waits); a replica that dies or
	// pauses for longer loses them, and another replica may take the
	// session or the submission over, or the next waiter its turn.
	LeaseTTL time.Duration `yaml:"leaseTtl"`
}

// DefaultLeaseTTL is replica.leaseTtl's default.
const DefaultLeaseTTL = 15 * time.Second

// Defaults of the submission queue limits.
const (
	DefaultMaxQueuedSubmissionsPerSession = 64
	DefaultMaxQueuedSubmissionsPerTenant  = 1024
)

// replicaID matches a replica id: what a hostname and a pid make.
var replicaID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$`)

// applyDefaults fills the replica's unset settings.
func (r *Replica) applyDefaults() {
	if r.ID == "" {
		host, err := os.Hostname()
		if err != nil || !replicaID.MatchString(host) {
			host = "turngate"
		}
		r.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
		if len(r.ID) > 128 {
			r.ID = r.ID[len(r.ID)-128:]
		}
	}
	r.LeaseTTL = cmp.Or(r.LeaseTTL, DefaultLeaseTTL)
}

// validate reports the replica settings that do not fit.
func (r *Replica) validate(add func(path, format string, args ...any)) {
	if !replicaID.MatchString(r.ID) {
		add("replica.id", "replica.id: must be 1-128 characters of letters, digits and _ . : @ -, starting with a letter or digit, not %q", r.ID)
	}
	if r.LeaseTTL < time.Second {
		add("replica.leaseTtl", "replica.leaseTtl: must be at least 1s, not %s", r.LeaseTTL)
	}
}
