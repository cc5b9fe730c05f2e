package anthropic

import (
	"fmt"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/dataurl"
)

// imageTypes are the image media types the Messages API accepts.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// CheckFile reports whether a user file can be sent as a Messages API
// content block: PNG, JPEG, GIF and WebP images, PDF and plain-text
// documents, inline or by URL.
func (p *Provider) CheckFile(mediaType string, _ bool) error {
	mt := strings.ToLower(mediaType)
	if imageTypes[mt] || mt == "application/pdf" || mt == "text/plain" {
		return nil
	}
	return fmt.Errorf("the Anthropic Messages API does not accept %q files (images png, jpeg, gif, webp; application/pdf; text/plain)", mediaType)
}

// fileBlock maps one user file, as the AI SDK's Anthropic provider does:
// an image block for images, a document block (titled with the file
// name) for PDFs and text; the source is the remote URL, or the inline
// data (base64, or the text itself for text/plain).
func (p *Provider) fileBlock(c engine.ContentPart) (any, error) {
	remote := !dataurl.Is(c.URL)
	if err := p.CheckFile(c.MediaType, remote); err != nil {
		return nil, err
	}
	mt := strings.ToLower(c.MediaType)
	var source map[string]any
	switch {
	case remote:
		source = map[string]any{"type": "url", "url": c.URL}
	default:
		u, err := dataurl.ParseStored(c.URL)
		if err != nil {
			return nil, err
		}
		if mt == "text/plain" {
			source = map[string]any{"type": "text", "media_type": mt, "data": u.Text()}
		} else {
			source = map[string]any{"type": "base64", "media_type": mt, "data": u.Base64Data()}
		}
	}
	if imageTypes[mt] {
		return map[string]any{"type": "image", "source": source}, nil
	}
	block := map[string]any{"type": "document", "source": source}
	if c.Filename != "" {
		block["title"] = c.Filename
	}
	return block, nil
}

// Provider sends file parts.
var _ engine.FileChecker = (*Provider)(nil)
