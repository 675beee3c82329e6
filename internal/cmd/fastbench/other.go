//go:build !linux

package main

import (
	"fmt"
	"io"
)

// measure fails every row: local sandboxes need Linux.
func measure(c config, _ io.Writer) []Result {
	var rs []Result
	for _, r := range c.rows {
		rs = append(rs, failed(r, r, Goal{}, fmt.Errorf("local sandboxes need Linux")))
	}
	return rs
}

// runChild fails: local sandboxes need Linux.
func runChild(config, io.Writer, io.Writer) int { return 1 }
