package openai

import (
	"fmt"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/dataurl"
)

// imageTypes are the image media types Chat Completions accepts.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// audioFormats maps the audio media types Chat Completions accepts to
// input_audio's format.
var audioFormats = map[string]string{"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}

// CheckFile reports whether a user file can be sent as a Chat Completions
// content part: PNG, JPEG, GIF and WebP images (inline or by URL), WAV
// and MP3 audio and PDF documents (inline only: the API takes no URL for
// them).
func (p *Provider) CheckFile(mediaType string, remote bool) error {
	mt := strings.ToLower(mediaType)
	switch {
	case imageTypes[mt]:
		return nil
	case audioFormats[mt] != "" || mt == "application/pdf":
		if remote {
			return fmt.Errorf("%s files must be sent inline (a data: URL): the Chat Completions API takes no URL for them", mt)
		}
		return nil
	}
	return fmt.Errorf("the Chat Completions API does not accept %q files (images png, jpeg, gif, webp; audio wav, mp3; application/pdf)", mediaType)
}

// userContent maps a user message's content: a plain string when it is
// text only (as before files existed, so text-only bodies are unchanged),
// else an array of text, image_url, input_audio and file parts.
func (p *Provider) userContent(m engine.ModelMessage) (any, error) {
	hasFile := false
	for _, c := range m.Content {
		hasFile = hasFile || c.Type == engine.ContentFile
	}
	if !hasFile {
		return m.Text(), nil
	}
	parts := make([]any, 0, len(m.Content))
	for i, c := range m.Content {
		switch c.Type {
		case engine.ContentText:
			parts = append(parts, map[string]any{"type": "text", "text": c.Text})
		case engine.ContentFile:
			part, err := p.filePart(c, i)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
		}
	}
	return parts, nil
}

// filePart maps one file, as the AI SDK's OpenAI provider does: images as
// image_url (a data: URL or the remote URL), audio as input_audio, PDFs
// as file {filename, file_data} (part-N.pdf when unnamed). An inline
// file's data: URL is sent re-encoded, with the part's media type and a
// lower-case "data:" and ";base64", never as the client spelt it: the
// gateway takes any case (RFC 2397 schemes are case-insensitive) and a
// percent-encoded payload, the API documents only that form.
func (p *Provider) filePart(c engine.ContentPart, index int) (any, error) {
	remote := !dataurl.Is(c.URL)
	if err := p.CheckFile(c.MediaType, remote); err != nil {
		return nil, err
	}
	if remote { // an image: CheckFile refuses other files by URL
		return map[string]any{"type": "image_url", "image_url": map[string]any{"url": c.URL}}, nil
	}
	u, err := dataurl.ParseStored(c.URL)
	if err != nil {
		return nil, err
	}
	mt := strings.ToLower(c.MediaType)
	switch {
	case imageTypes[mt]:
		return map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataurl.EncodeBase64(mt, u.Base64Data())}}, nil
	case audioFormats[mt] != "":
		return map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": u.Base64Data(), "format": audioFormats[mt]}}, nil
	}
	name := c.Filename
	if name == "" {
		name = fmt.Sprintf("part-%d.pdf", index)
	}
	return map[string]any{"type": "file", "file": map[string]any{"filename": name,
		"file_data": dataurl.EncodeBase64("application/pdf", u.Base64Data())}}, nil
}

// Provider sends file parts.
var _ engine.FileChecker = (*Provider)(nil)
