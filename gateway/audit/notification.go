package audit

import "time"

// KindNotification is the kind of an approval notification's record.
const KindNotification = "notification"

// Notification is the outcome of one approval event's delivery to one
// webhook (gateway/notify): delivered, failed after its attempts, or
// dropped from a full queue.
type Notification struct {
	Time       time.Time `json:"time"`
	EventID    string    `json:"eventId"`
	Event      string    `json:"event"`
	ApprovalID string    `json:"approvalId"`
	Tenant     string    `json:"tenant"`
	URL        string    `json:"url"`
	Outcome    string    `json:"outcome"`
	Attempts   int       `json:"attempts"`
	Status     int       `json:"status,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// Notification writes an approval notification's outcome.
func (l *Log) Notification(n *Notification) { l.write(KindNotification, n) }
