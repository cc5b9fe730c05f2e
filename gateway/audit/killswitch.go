package audit

import (
	"time"

	"github.com/turngate/turngate/gateway/store"
)

// KindKillSwitch is the kind of kill switch records: an operator set or
// lifted a switch. The calls and turns a switch stops are decision
// records naming it (rulesFired "killswitch/<id>").
const KindKillSwitch = "killswitch"

// Kill switch actions.
const (
	KillSwitchSet    = "set"
	KillSwitchLifted = "lifted"
)

// KillSwitch is the audit record of a kill switch set or lifted: who did
// it, why, and the switch.
type KillSwitch struct {
	Time time.Time `json:"time"`
	// Action is KillSwitchSet or KillSwitchLifted.
	Action    string `json:"action"`
	RequestID string `json:"requestId,omitempty"`
	// By is the subject (and ByTenant the tenant) of the admin who acted.
	By       string `json:"by"`
	ByTenant string `json:"byTenant"`
	// Reason is why: the switch's reason when set, the lift's when lifted.
	Reason  string           `json:"reason,omitempty"`
	Switch  store.KillSwitch `json:"switch"`
	Replica string           `json:"replica,omitempty"`
}

// KillSwitch writes a kill switch record.
func (l *Log) KillSwitch(k *KillSwitch) { l.write(KindKillSwitch, k) }
