package daytona

import (
	"regexp"
	"testing"
)

// TestFUSEServerPattern: the pattern unmount waits on matches the FUSE
// servers of the mount point (as started, or by path) and neither another
// mount point's nor the shell that runs the wait.
func TestFUSEServerPattern(t *testing.T) {
	re := regexp.MustCompile(fuseServerPattern("/home/daytona/bucket.1"))
	for line, want := range map[string]bool{
		"s3fs bkt /home/daytona/bucket.1 -o passwd_file=/tmp/x -o allow_other":      true,
		"/usr/bin/gcsfuse --implicit-dirs bkt /home/daytona/bucket.1":               true,
		"s3fs bkt /home/daytona/bucket.10 -o allow_other":                           false,
		"s3fs bkt /home/daytona/bucketx1 -o allow_other":                            false,
		"sh -c fusermount -u /home/daytona/bucket.1; pgrep -f -- '^(s3fs|gcsfuse)'": false,
		"bash": false,
	} {
		if got := re.MatchString(line); got != want {
			t.Errorf("%q: match %v, want %v", line, got, want)
		}
	}
}
