package engine

// TurnRefusedError ends a turn that a beforeTurn hook refused
// (TurnConfig.Refuse) before any model call. Reason is the text the
// client sees: the UI stream's error chunk, the gateway's turn_refused
// error.
type TurnRefusedError struct {
	Reason string
}

func (e *TurnRefusedError) Error() string { return "turn refused: " + e.Reason }

// refusal is the setup error of a refused turn: its reason is public.
func refusal(reason string) error {
	return &publicError{msg: reason, cause: &TurnRefusedError{Reason: reason}}
}
