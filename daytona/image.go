package daytona

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/agentbox-dev/agentbox/sandbox"
)

// Image is a declarative image, as the Image builder of Daytona's SDKs
// makes them: a base image and steps (commands to run, environment,
// working directory, entrypoint…) appended in call order, rendered as a
// Dockerfile by [Image.Dockerfile]; or a Dockerfile given whole
// ([ImageFromDockerfile]). Build one into a snapshot with
// [Client.BuildSnapshot].
//
// Its methods return a new Image and leave the receiver as it was, so a
// common base can be extended in several ways. The zero Image has no base
// and is not valid. Local files (Daytona's addLocalFile and
// addLocalDir) are not supported: they need a build context uploaded to
// Daytona's object storage.
type Image struct {
	base  string   // the FROM image; "" for a raw Dockerfile
	raw   string   // a Dockerfile given whole
	lines []string // the instructions after FROM, rendered
	err   error    // the first invalid step
}

// BaseImage returns an image built from the image ref, such as
// "python:3.12-slim" (Daytona's Image.base).
func BaseImage(ref string) Image {
	img := Image{base: ref}
	if ref == "" || strings.ContainsFunc(ref, isSpaceOrControl) {
		img.err = fmt.Errorf("base image %q is not an image reference such as python:3.12-slim", ref)
	}
	return img
}

// ImageFromDockerfile returns the image the Dockerfile content builds
// (Daytona's Image.fromDockerfile, given the file's content). Its COPY
// and ADD can only take from other stages or URLs: there is no build
// context.
func ImageFromDockerfile(content string) Image {
	img := Image{raw: content}
	if strings.TrimSpace(content) == "" {
		img.err = errors.New("the Dockerfile is empty")
	}
	return img
}

// isSpaceOrControl reports whether r is white space or a control
// character.
func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// with returns a copy of i with line appended, or with err when i has no
// error yet.
func (i Image) with(line string, err error) Image {
	i.lines = slices.Clip(i.lines)
	if i.err == nil && err == nil && i.raw != "" {
		err = errors.New("a Dockerfile given whole takes no further steps: add them to the Dockerfile")
	}
	if i.err == nil && err != nil {
		i.err = err
		return i
	}
	i.lines = append(i.lines, line)
	return i
}

// RunCommands adds a RUN step for each command, run by /bin/sh -c in
// order (Daytona's runCommands). A command must fit on one line.
func (i Image) RunCommands(commands ...string) Image {
	for _, c := range commands {
		var err error
		if strings.TrimSpace(c) == "" || strings.ContainsAny(c, "\r\n") {
			err = fmt.Errorf("run command %q: a command must be one non-empty line (join lines with &&)", c)
		}
		i = i.with("RUN "+c, err)
	}
	return i
}

// PipInstall adds a step installing the Python packages with pip
// (Daytona's pipInstall); extra are added to pip's command line, such as
// "--index-url" and a URL.
func (i Image) PipInstall(packages []string, extra ...string) Image {
	if len(packages) == 0 {
		return i.with("", errors.New("pip install: no packages given"))
	}
	words := []string{"python", "-m", "pip", "install"}
	for _, w := range slices.Concat(extra, packages) {
		words = append(words, sandbox.ShellQuote(w))
	}
	return i.RunCommands(strings.Join(words, " "))
}

// Env adds the variables to the image's environment, sorted by name
// (Daytona's env).
func (i Image) Env(vars map[string]string) Image {
	if len(vars) == 0 {
		return i
	}
	var b strings.Builder
	b.WriteString("ENV")
	var err error
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if !sandbox.ValidEnvName(k) {
			err = fmt.Errorf("environment variable name %q is invalid: use letters, digits and _, not starting with a digit", k)
			break
		}
		if strings.ContainsAny(vars[k], "\r\n") {
			err = fmt.Errorf("environment variable %s: a value must be one line", k)
			break
		}
		b.WriteString(" " + k + "=" + dockerQuote(vars[k]))
	}
	return i.with(b.String(), err)
}

// Workdir sets the working directory of the later steps and of the
// image's sandboxes (Daytona's workdir); it must be absolute.
func (i Image) Workdir(dir string) Image {
	var err error
	if !path.IsAbs(dir) || strings.ContainsFunc(dir, func(r rune) bool { return isSpaceOrControl(r) || strings.ContainsRune(`"'$\`+"`", r) }) {
		err = fmt.Errorf("workdir %q is not an absolute path without spaces, quotes, $ or \\", dir)
	}
	return i.with("WORKDIR "+dir, err)
}

// Entrypoint sets the image's entrypoint (Daytona's entrypoint).
func (i Image) Entrypoint(args ...string) Image {
	return i.execForm("ENTRYPOINT", args)
}

// Cmd sets the image's default command (Daytona's cmd).
func (i Image) Cmd(args ...string) Image {
	return i.execForm("CMD", args)
}

// execForm adds the instruction in with args in JSON (exec) form.
func (i Image) execForm(in string, args []string) Image {
	if len(args) == 0 {
		return i.with("", fmt.Errorf("%s: no arguments given", strings.ToLower(in)))
	}
	data, err := json.Marshal(args)
	return i.with(in+" "+string(data), err)
}

// DockerfileCommands adds Dockerfile instructions as they are (Daytona's
// dockerfileCommands), one a line.
func (i Image) DockerfileCommands(lines ...string) Image {
	for _, l := range lines {
		var err error
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, "\r\n") {
			err = fmt.Errorf("dockerfile command %q: an instruction must be one non-empty line", l)
		}
		i = i.with(l, err)
	}
	return i
}

// Err returns what is wrong with the image (its first invalid step), nil
// when it is valid. It matches sandbox.ErrInvalidArgument.
func (i Image) Err() error {
	switch {
	case i.err != nil:
		return fmt.Errorf("daytona: image: %w: %w", i.err, sandbox.ErrInvalidArgument)
	case i.base == "" && i.raw == "":
		return fmt.Errorf("daytona: image: no base image: start from BaseImage or ImageFromDockerfile: %w", sandbox.ErrInvalidArgument)
	}
	return nil
}

// Dockerfile returns the Dockerfile that builds the image: FROM the base,
// then the steps in order; a Dockerfile given whole as it is.
func (i Image) Dockerfile() string {
	if i.raw != "" {
		if !strings.HasSuffix(i.raw, "\n") {
			return i.raw + "\n"
		}
		return i.raw
	}
	var b strings.Builder
	b.WriteString("FROM " + i.base + "\n")
	for _, l := range i.lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// imageName returns the base image when the image is nothing more than
// it, which Daytona pulls instead of building.
func (i Image) imageName() string {
	if i.raw == "" && len(i.lines) == 0 {
		return i.base
	}
	return ""
}

// dockerQuote quotes s as a word of a Dockerfile instruction: in double
// quotes, with \, " and $ escaped.
func dockerQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`)
	return `"` + r.Replace(s) + `"`
}
