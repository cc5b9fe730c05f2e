package config

import "time"

// Decisions configures the decision store (gateway/decisions): every hook's
// audit record is also kept in the store, for GET /v1/admin/decisions and
// the console, and pruned after Retention. The JSONL audit log is written
// as before either way.
type Decisions struct {
	// Store keeps the records in the store; default true. false leaves
	// the admin API's decisions, timeline and replay without records.
	Store *bool `yaml:"store"`
	// Retention is how long a stored record is kept (default
	// DefaultDecisionRetention, at least MinDecisionRetention); older ones
	// are pruned a bounded batch at a time.
	Retention time.Duration `yaml:"retention"`
}

// DefaultDecisionRetention is decisions.retention's default: a week.
const DefaultDecisionRetention = 7 * 24 * time.Hour

// MinDecisionRetention is the shortest decisions.retention: a shorter one
// would prune records while a turn that made them still runs.
const MinDecisionRetention = time.Hour

// Stored reports whether the records are kept in the store.
func (d *Decisions) Stored() bool { return d.Store == nil || *d.Store }

// validate reports a retention that does not fit.
func (d *Decisions) validate(add func(path, format string, args ...any)) {
	if d.Retention < MinDecisionRetention {
		add("decisions.retention", "decisions.retention: must be at least %s (the default is %s), not %s",
			MinDecisionRetention, DefaultDecisionRetention, d.Retention)
	}
}
