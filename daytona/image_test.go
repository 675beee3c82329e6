package daytona

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox-dev/agentbox/sandbox"
)

func TestImageDockerfile(t *testing.T) {
	base := BaseImage("python:3.12-slim")
	img := base.
		RunCommands("apt-get update && apt-get install -y git", "echo done").
		PipInstall([]string{"requests==2.32.3", "numpy"}, "--index-url", "https://pypi.org/simple").
		Env(map[string]string{"B": `say "hi" $HOME\`, "A": "1"}).
		Workdir("/home/daytona/app").
		Entrypoint("sleep", "infinity").
		Cmd("python", "-V").
		DockerfileCommands("LABEL team=a")
	want := `FROM python:3.12-slim
RUN apt-get update && apt-get install -y git
RUN echo done
RUN python -m pip install --index-url https://pypi.org/simple requests==2.32.3 numpy
ENV A="1" B="say \"hi\" \$HOME\\"
WORKDIR /home/daytona/app
ENTRYPOINT ["sleep","infinity"]
CMD ["python","-V"]
LABEL team=a
`
	if err := img.Err(); err != nil {
		t.Fatal(err)
	}
	if got := img.Dockerfile(); got != want {
		t.Errorf("Dockerfile:\n%s\nwant\n%s", got, want)
	}
	// The steps made a new image: the base is as it was.
	if got := base.Dockerfile(); got != "FROM python:3.12-slim\n" || base.imageName() != "python:3.12-slim" || img.imageName() != "" {
		t.Errorf("base after extending it: %q", got)
	}
	raw := ImageFromDockerfile("FROM alpine:3.20\nRUN true")
	if raw.Err() != nil || raw.Dockerfile() != "FROM alpine:3.20\nRUN true\n" || raw.imageName() != "" {
		t.Errorf("raw Dockerfile: %q, %v", raw.Dockerfile(), raw.Err())
	}

	for _, tc := range []struct {
		img  Image
		want string
	}{
		{Image{}, "no base image"},
		{BaseImage(""), "not an image reference"},
		{BaseImage("a b"), "not an image reference"},
		{ImageFromDockerfile("  \n"), "Dockerfile is empty"},
		{ImageFromDockerfile("FROM x").RunCommands("true"), "given whole"},
		{base.RunCommands("echo a\nFROM evil"), "one non-empty line"},
		{base.RunCommands(""), "one non-empty line"},
		{base.Env(map[string]string{"1BAD": "x"}), `"1BAD" is invalid`},
		{base.Env(map[string]string{"OK": "two\nlines"}), "one line"},
		{base.Workdir("relative"), "not an absolute path"},
		{base.Workdir("/a b"), "not an absolute path"},
		{base.Entrypoint(), "no arguments"},
		{base.PipInstall(nil), "no packages"},
		{base.DockerfileCommands("RUN a\nRUN b"), "one non-empty line"},
		// The first error is kept.
		{base.Workdir("x").RunCommands(""), "workdir"},
	} {
		err := tc.img.Err()
		if !errors.Is(err, sandbox.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an invalid-argument error saying %q", tc.img.Dockerfile(), err, tc.want)
		}
	}
}

func ExampleImage() {
	img := BaseImage("python:3.12-slim").
		PipInstall([]string{"requests"}).
		Env(map[string]string{"APP_ENV": "prod"}).
		Workdir("/app")
	fmt.Print(img.Dockerfile())
	// Output:
	// FROM python:3.12-slim
	// RUN python -m pip install requests
	// ENV APP_ENV="prod"
	// WORKDIR /app
}
