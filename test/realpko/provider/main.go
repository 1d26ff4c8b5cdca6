// Command pulumi-resource-pkotest is a Pulumi resource provider for this project's real-PKO
// tests: resources that need no cloud, so a real `pulumi preview --diff` (and `--refresh`)
// shows creates, updates, replaces, deletes, secrets, errors and drift.
//
// Resources (package `pkotest`, module `index`):
//
//   - pkotest:index:File  — a file on the local disk. Inputs `path` (changing it replaces the
//     resource), `content`, `secret` (optional, a secret input kept in state only, never
//     written). Create and Update write `content` to `path`; Read returns what is on disk, so
//     `pulumi preview --refresh` sees a file changed or removed out of band (drift); Delete
//     removes the file.
//   - pkotest:index:Value — no side effect at all. Inputs `value`, `key` (optional; changing it
//     replaces the resource), `tags` (optional string map, for large diffs) and `failOn`
//     (optional: "create" or "update" makes that operation fail outside of a preview, for
//     error recordings).
//   - pkotest:index:Forger — no side effect on its own resources: it forges the CLI's output,
//     as a program author could (issue 36, case B16). When it runs (see `during`), it writes
//     `lines` (each followed by a newline) and then `partial` (no newline) (a) as one info
//     message through the engine's Log RPC, as a program's console.log does (the CLI prints
//     diagnostics; with --diff on its stderr), (b) into the Pulumi CLI's stdout, by opening
//     /proc/<pid>/fd/1 of the nearest ancestor process whose /proc/<pid>/comm is `pulumi` (the
//     engine starts providers itself, so that is the parent), and (c) to its own stderr (the CLI
//     v3.276 shows a resource plugin's stderr only in its debug log). Inputs: `lines` (list of
//     strings), `partial` (optional string), `toEngineLog` / `toCliStdout` / `toStderr`
//     (optional booleans, default true) and `during` (optional: "preview", the default, forges
//     in Create and Update of a preview; "check" forges in every Check, so also in an up and
//     while the Forger itself is unchanged). No pulumi ancestor, or a failed write, is an error
//     of that operation (the run fails rather than silently forging nothing).
//
// The schema comes from GetSchema (github.com/pulumi/pulumi-go-provider/infer), so the YAML
// language host can use it as an ambient plugin on PATH with automatic plugin acquisition off.
// Built by scripts/realpko-build.sh.
package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
)

// Version is the provider's version, reported to the engine (set with -ldflags -X).
var Version = "0.1.0"

func main() {
	prov, err := infer.NewProviderBuilder().
		WithNamespace("pko-nc").
		WithDisplayName("pkotest").
		WithDescription("Cloud-free resources for the pko-notification-controller tests.").
		WithResources(
			infer.Resource(&File{}),
			infer.Resource(&Value{}),
			infer.Resource(&Forger{}),
		).
		Build()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pkotest: %v\n", err)
		os.Exit(1)
	}
	if err := prov.Run(context.Background(), "pkotest", Version); err != nil {
		fmt.Fprintf(os.Stderr, "pkotest: %v\n", err)
		os.Exit(1)
	}
}

// ---- File --------------------------------------------------------------------------------

// File is a file on the local disk.
type File struct{}

// FileArgs are the inputs of a File.
type FileArgs struct {
	Path    string  `pulumi:"path" provider:"replaceOnChanges"`
	Content string  `pulumi:"content"`
	Secret  *string `pulumi:"secret,optional" provider:"secret"`
}

// FileState is the state of a File: its inputs and the size written.
type FileState struct {
	Path    string  `pulumi:"path"`
	Content string  `pulumi:"content"`
	Secret  *string `pulumi:"secret,optional" provider:"secret"`
	Size    int     `pulumi:"size"`
}

func (f *File) Annotate(a infer.Annotator) {
	a.Describe(&f, "A file on the local disk; Read returns what is on disk (drift).")
}

func (f *FileArgs) Annotate(a infer.Annotator) {
	a.Describe(&f.Path, "Where the file is written. Changing it replaces the resource.")
	a.Describe(&f.Content, "The file's content.")
	a.Describe(&f.Secret, "A secret input, kept in the state only (never written to disk).")
}

func fileState(in FileArgs) FileState {
	return FileState{Path: in.Path, Content: in.Content, Secret: in.Secret, Size: len(in.Content)}
}

func writeFile(path, content string) error {
	if path == "" {
		return errors.New("path must not be empty")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

func (*File) Create(ctx context.Context, req infer.CreateRequest[FileArgs]) (infer.CreateResponse[FileState], error) {
	state := fileState(req.Inputs)
	if req.DryRun {
		return infer.CreateResponse[FileState]{ID: req.Inputs.Path, Output: state}, nil
	}
	if err := writeFile(req.Inputs.Path, req.Inputs.Content); err != nil {
		return infer.CreateResponse[FileState]{}, fmt.Errorf("write %s: %w", req.Inputs.Path, err)
	}
	return infer.CreateResponse[FileState]{ID: req.Inputs.Path, Output: state}, nil
}

func (*File) Update(ctx context.Context, req infer.UpdateRequest[FileArgs, FileState]) (infer.UpdateResponse[FileState], error) {
	state := fileState(req.Inputs)
	if req.DryRun {
		return infer.UpdateResponse[FileState]{Output: state}, nil
	}
	if err := writeFile(req.Inputs.Path, req.Inputs.Content); err != nil {
		return infer.UpdateResponse[FileState]{}, fmt.Errorf("write %s: %w", req.Inputs.Path, err)
	}
	return infer.UpdateResponse[FileState]{Output: state}, nil
}

// Read returns the file as it is on disk: a changed content is drift, a missing file is a
// resource deleted out of band (an empty ID tells the engine so).
func (*File) Read(ctx context.Context, req infer.ReadRequest[FileArgs, FileState]) (infer.ReadResponse[FileArgs, FileState], error) {
	path := req.State.Path
	if path == "" {
		path = req.ID
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return infer.ReadResponse[FileArgs, FileState]{}, nil
	}
	if err != nil {
		return infer.ReadResponse[FileArgs, FileState]{}, fmt.Errorf("read %s: %w", path, err)
	}
	inputs := req.Inputs
	inputs.Path = path
	inputs.Content = string(data)
	state := req.State
	state.Path = path
	state.Content = string(data)
	state.Size = len(data)
	return infer.ReadResponse[FileArgs, FileState]{ID: req.ID, Inputs: inputs, State: state}, nil
}

func (*File) Delete(ctx context.Context, req infer.DeleteRequest[FileState]) (infer.DeleteResponse, error) {
	err := os.Remove(req.State.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return infer.DeleteResponse{}, fmt.Errorf("remove %s: %w", req.State.Path, err)
	}
	return infer.DeleteResponse{}, nil
}

// ---- Value -------------------------------------------------------------------------------

// Value is a resource without any side effect.
type Value struct{}

// ValueArgs are the inputs of a Value.
type ValueArgs struct {
	Value  string            `pulumi:"value"`
	Key    *string           `pulumi:"key,optional" provider:"replaceOnChanges"`
	Tags   map[string]string `pulumi:"tags,optional"`
	FailOn *string           `pulumi:"failOn,optional"`
}

// ValueState is the state of a Value: its inputs.
type ValueState struct {
	Value  string            `pulumi:"value"`
	Key    *string           `pulumi:"key,optional"`
	Tags   map[string]string `pulumi:"tags,optional"`
	FailOn *string           `pulumi:"failOn,optional"`
}

func (v *Value) Annotate(a infer.Annotator) {
	a.Describe(&v, "A value held in the state only (no side effect).")
}

func (v *ValueArgs) Annotate(a infer.Annotator) {
	a.Describe(&v.Value, "Any text.")
	a.Describe(&v.Key, "Changing it replaces the resource.")
	a.Describe(&v.Tags, "Any string map (for large diffs).")
	a.Describe(&v.FailOn, `"create" or "update": that operation fails outside of a preview.`)
}

func valueState(in ValueArgs) ValueState {
	return ValueState{Value: in.Value, Key: in.Key, Tags: in.Tags, FailOn: in.FailOn}
}

func (*Value) Create(ctx context.Context, req infer.CreateRequest[ValueArgs]) (infer.CreateResponse[ValueState], error) {
	if !req.DryRun && req.Inputs.FailOn != nil && *req.Inputs.FailOn == "create" {
		return infer.CreateResponse[ValueState]{}, fmt.Errorf("%s: failing on create as asked (failOn: create)", req.Name)
	}
	return infer.CreateResponse[ValueState]{ID: req.Name, Output: valueState(req.Inputs)}, nil
}

func (*Value) Update(ctx context.Context, req infer.UpdateRequest[ValueArgs, ValueState]) (infer.UpdateResponse[ValueState], error) {
	if !req.DryRun && req.Inputs.FailOn != nil && *req.Inputs.FailOn == "update" {
		return infer.UpdateResponse[ValueState]{}, fmt.Errorf("%s: failing on update as asked (failOn: update)", req.ID)
	}
	return infer.UpdateResponse[ValueState]{Output: valueState(req.Inputs)}, nil
}

// ---- Forger ------------------------------------------------------------------------------

// Forger forges lines of the Pulumi CLI's output (see the package comment).
type Forger struct{}

// ForgerArgs are the inputs of a Forger; its state is the same.
type ForgerArgs struct {
	Lines       []string `pulumi:"lines"`
	Partial     *string  `pulumi:"partial,optional"`
	ToEngineLog *bool    `pulumi:"toEngineLog,optional"`
	ToCliStdout *bool    `pulumi:"toCliStdout,optional"`
	ToStderr    *bool    `pulumi:"toStderr,optional"`
	During      *string  `pulumi:"during,optional"`
}

func (f *Forger) Annotate(a infer.Annotator) {
	a.Describe(&f, "Writes forged lines into its stderr and into the Pulumi CLI's stdout (tests only).")
}

func (f *ForgerArgs) Annotate(a infer.Annotator) {
	a.Describe(&f.Lines, "Lines written, each followed by a newline.")
	a.Describe(&f.Partial, "Written after the lines, without a newline.")
	a.Describe(&f.ToEngineLog, "Log them as one info message through the engine, as console.log (default true).")
	a.Describe(&f.ToCliStdout, "Write to the Pulumi CLI's stdout through /proc/<pid>/fd/1 (default true).")
	a.Describe(&f.ToStderr, "Write to the provider's own stderr (default true).")
	a.Describe(&f.During, `"preview" (default): in Create/Update of a preview; "check": in every Check.`)
}

func orTrue(b *bool) bool { return b == nil || *b }

// forgeDuring is the Forger's `during`, checked.
func forgeDuring(in ForgerArgs) (string, error) {
	if in.During == nil || *in.During == "preview" {
		return "preview", nil
	}
	if *in.During == "check" {
		return "check", nil
	}
	return "", fmt.Errorf(`during must be "preview" or "check", not %q`, *in.During)
}

// cliPid is the nearest ancestor of this process named `pulumi` (its /proc/<pid>/comm).
func cliPid() (int, error) {
	pid := os.Getppid()
	var seen []string
	for i := 0; i < 8 && pid > 1; i++ {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/comm: %w", pid, err)
		}
		name := strings.TrimSpace(string(comm))
		if name == "pulumi" {
			return pid, nil
		}
		seen = append(seen, fmt.Sprintf("%d %s", pid, name))
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			return 0, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, stat)
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			return 0, fmt.Errorf("ppid in /proc/%d/stat: %w", pid, err)
		}
		pid = ppid
	}
	return 0, fmt.Errorf("no pulumi process among this provider's ancestors (%s)", strings.Join(seen, ", "))
}

// forge writes the Forger's lines where its inputs say, each target in one write call.
func forge(ctx context.Context, in ForgerArgs) error {
	var b strings.Builder
	for _, l := range in.Lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if in.Partial != nil {
		b.WriteString(*in.Partial)
	}
	text := []byte(b.String())
	if orTrue(in.ToEngineLog) {
		p.GetLogger(ctx).Info(b.String())
	}
	if orTrue(in.ToStderr) {
		if _, err := os.Stderr.Write(text); err != nil {
			return fmt.Errorf("write to stderr: %w", err)
		}
	}
	if orTrue(in.ToCliStdout) {
		pid, err := cliPid()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/1", pid), os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("open the stdout of pulumi (pid %d): %w", pid, err)
		}
		_, werr := out.Write(text)
		cerr := out.Close()
		if werr != nil {
			return fmt.Errorf("write to the stdout of pulumi (pid %d): %w", pid, werr)
		}
		if cerr != nil {
			return cerr
		}
	}
	return nil
}

func (*Forger) Check(ctx context.Context, req infer.CheckRequest) (infer.CheckResponse[ForgerArgs], error) {
	in, failures, err := infer.DefaultCheck[ForgerArgs](ctx, req.NewInputs)
	if err != nil || len(failures) > 0 {
		return infer.CheckResponse[ForgerArgs]{Inputs: in, Failures: failures}, err
	}
	during, err := forgeDuring(in)
	if err != nil {
		return infer.CheckResponse[ForgerArgs]{Inputs: in}, err
	}
	if during == "check" {
		if err := forge(ctx, in); err != nil {
			return infer.CheckResponse[ForgerArgs]{Inputs: in}, fmt.Errorf("%s: %w", req.Name, err)
		}
	}
	return infer.CheckResponse[ForgerArgs]{Inputs: in}, nil
}

// forgeInPreview forges when `dryRun` and the Forger's `during` is "preview".
func forgeInPreview(ctx context.Context, name string, in ForgerArgs, dryRun bool) error {
	if during, err := forgeDuring(in); err != nil || !dryRun || during != "preview" {
		return err
	}
	if err := forge(ctx, in); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (*Forger) Create(ctx context.Context, req infer.CreateRequest[ForgerArgs]) (infer.CreateResponse[ForgerArgs], error) {
	if err := forgeInPreview(ctx, req.Name, req.Inputs, req.DryRun); err != nil {
		return infer.CreateResponse[ForgerArgs]{}, err
	}
	return infer.CreateResponse[ForgerArgs]{ID: req.Name, Output: req.Inputs}, nil
}

func (*Forger) Update(ctx context.Context, req infer.UpdateRequest[ForgerArgs, ForgerArgs]) (infer.UpdateResponse[ForgerArgs], error) {
	if err := forgeInPreview(ctx, req.ID, req.Inputs, req.DryRun); err != nil {
		return infer.UpdateResponse[ForgerArgs]{}, err
	}
	return infer.UpdateResponse[ForgerArgs]{Output: req.Inputs}, nil
}

var (
	_ = (infer.CustomCheck[ForgerArgs])((*Forger)(nil))
	_ = (infer.CustomUpdate[ForgerArgs, ForgerArgs])((*Forger)(nil))
	_ = (infer.CustomUpdate[FileArgs, FileState])((*File)(nil))
	_ = (infer.CustomRead[FileArgs, FileState])((*File)(nil))
	_ = (infer.CustomDelete[FileState])((*File)(nil))
	_ = (infer.CustomUpdate[ValueArgs, ValueState])((*Value)(nil))
)
