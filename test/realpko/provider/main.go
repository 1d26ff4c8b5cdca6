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

var (
	_ = (infer.CustomUpdate[FileArgs, FileState])((*File)(nil))
	_ = (infer.CustomRead[FileArgs, FileState])((*File)(nil))
	_ = (infer.CustomDelete[FileState])((*File)(nil))
	_ = (infer.CustomUpdate[ValueArgs, ValueState])((*Value)(nil))
)
