package local

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// TestResolveImageUser: an image's USER resolves as Docker resolves it.
func TestResolveImageUser(t *testing.T) {
	passwd := []byte("# comment\nroot:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\nnohome:x:1001:1001:::/bin/sh\nbad:x:notanumber:1::/:/bin/sh\n")
	group := []byte("root:x:0:\nnode:x:1000:\nextra:x:2000:node,other\nmore:x:2001:other, node\n")
	for _, tc := range []struct {
		spec string
		want *runAs
		err  error
	}{
		{"", nil, nil},
		{"root", nil, nil},
		{"0:0", nil, nil},
		{"node", &runAs{Name: "node", UID: 1000, GID: 1000, Groups: []int{2000, 2001}, Home: "/home/node"}, nil},
		{"1000", &runAs{Name: "node", UID: 1000, GID: 1000, Groups: []int{2000, 2001}, Home: "/home/node"}, nil},
		{"node:extra", &runAs{Name: "node", UID: 1000, GID: 2000, Home: "/home/node"}, nil},
		{"node:3000", &runAs{Name: "node", UID: 1000, GID: 3000, Home: "/home/node"}, nil},
		{"4242", &runAs{Name: "4242", UID: 4242, Home: "/"}, nil},
		{"4242:4243", &runAs{Name: "4242", UID: 4242, GID: 4243, Home: "/"}, nil},
		{"nohome", &runAs{Name: "nohome", UID: 1001, GID: 1001, Home: "/"}, nil},
		{"ghost", nil, sandbox.ErrNotFound},
		{"bad", nil, sandbox.ErrNotFound},
		{"node:ghosts", nil, sandbox.ErrNotFound},
		{":1", nil, sandbox.ErrInvalidArgument},
		{"node:", nil, sandbox.ErrInvalidArgument},
	} {
		got, err := resolveImageUser(tc.spec, passwd, group)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%q: error %v, want %v", tc.spec, err, tc.err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, want %+v", tc.spec, got, tc.want)
		}
	}
	if got, err := resolveImageUser("1000", nil, nil); err != nil || got.UID != 1000 || got.Home != "/" {
		t.Errorf("a uid in an image without passwd: %+v, %v", got, err)
	}
}
