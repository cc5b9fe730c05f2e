package engine

import "github.com/turngate/turngate/internal/dataurl"

// Attachment describes one file of the turn's last user message, as the
// rules see it (CEL turn.attachments, Rego input.attachments).
type Attachment struct {
	// MediaType is the part's declared media type.
	MediaType string `json:"mediaType"`
	// Filename is the client's file name ("" if none).
	Filename string `json:"filename,omitempty"`
	// Size is the file's size in bytes: the decoded payload of a data: URL;
	// -1 for a remote URL the gateway did not fetch.
	Size int64 `json:"size"`
	// Remote marks a file given by URL rather than inline.
	Remote bool `json:"remote"`
	// URL is a remote file's URL ("" for inline files).
	URL string `json:"url,omitempty"`
}

// Attachments returns the file parts of the last user message in msgs,
// in part order; nil when it has none. A part whose data: URL does not
// parse (the gateway refuses those) counts with size -1.
func Attachments(msgs []UIMessage) []Attachment {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != RoleUser {
			continue
		}
		var out []Attachment
		for _, p := range msgs[i].Parts {
			if p.Type == PartFile {
				out = append(out, attachmentOf(p))
			}
		}
		return out
	}
	return nil
}

func attachmentOf(p UIPart) Attachment {
	a := Attachment{MediaType: p.MediaType, Filename: p.Filename, Size: -1}
	if !dataurl.Is(p.URL) {
		a.Remote, a.URL = true, p.URL
		return a
	}
	if u, err := dataurl.ParseStored(p.URL); err == nil {
		a.Size = u.Size
	}
	return a
}

// FileChecker is implemented by providers that can send file parts to
// their model. CheckFile returns why a file of mediaType (remote: given
// by URL rather than inline data) cannot be sent, nil when it can. The
// gateway checks a user message's files with it before admitting a turn,
// so an unsupported file is a 400, not a failed turn; providers that do
// not implement it ignore file parts.
type FileChecker interface {
	CheckFile(mediaType string, remote bool) error
}

// FileChecker returns the FileChecker of model's provider; nil when the
// model does not resolve or its provider does not implement one.
func (e *Engine) FileChecker(model string) FileChecker {
	if e.opts.Models == nil {
		return nil
	}
	p, _, err := e.opts.Models.Resolve(model)
	if err != nil {
		return nil
	}
	fc, _ := p.(FileChecker)
	return fc
}

// attachments returns the files of the turn's last user message: those of
// the turn context once setup built it (before, while setup settles tool
// approvals, computed from the request).
func (t *turn) attachments() []Attachment {
	if t.turnCtx != nil {
		return t.turnCtx.Attachments
	}
	return Attachments(t.req.Messages)
}
