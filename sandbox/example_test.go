package sandbox_test

import (
	"fmt"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func ExampleShellQuote() {
	fmt.Println(sandbox.ShellQuote("/srv/app"))
	fmt.Println(sandbox.ShellQuote("hello world"))
	fmt.Println(sandbox.ShellQuote("it's"))
	fmt.Println(sandbox.CommandLine("grep -r", []string{"TODO", "my dir"}))
	// Output:
	// /srv/app
	// 'hello world'
	// 'it'\''s'
	// grep -r TODO 'my dir'
}
