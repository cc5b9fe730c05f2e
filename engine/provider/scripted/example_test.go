package scripted_test

import (
	"context"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

func Example() {
	script, err := scripted.Parse("model.yaml", []byte(`
rules:
  - name: greet
    when: {user: {regex: '^hello (?P<who>\w+)'}}
    reply: {text: "Hi ${who}!"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	p := scripted.New(script, scripted.WithChunkSize(4))
	s, _ := p.Stream(context.Background(), &engine.ModelRequest{Messages: []engine.ModelMessage{
		{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "hello Ada"}}},
	}})
	defer s.Close()
	for s.Next() {
		part := s.Current()
		fmt.Printf("%s %q\n", part.Type, part.Text)
	}
	// Output:
	// text-start ""
	// text-delta "Hi A"
	// text-delta "da!"
	// text-end ""
	// finish ""
}
