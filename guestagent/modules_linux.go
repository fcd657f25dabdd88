//go:build linux

package guestagent

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/vm/bootparams"
)

// moduleNameOf is a module's name from its initramfs file name
// ("07-virtio_net.ko" → "virtio_net"), with '-' spelled '_' as the kernel
// treats them alike.
func moduleNameOf(file string) string {
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if _, rest, ok := strings.Cut(name, "-"); ok && strings.Trim(name[:len(name)-len(rest)-1], "0123456789") == "" {
		name = rest
	}
	return strings.ReplaceAll(name, "-", "_")
}

// unneededModules names the modules whose only use is a transport or
// device this boot's configuration does not have: loading them would only
// cost boot time. Everything else (fuse, for users' own FUSE mounts; ext4
// and its helpers; veth and nftables, which the network policy needs at run
// time whatever the boot configuration) is always loaded.
func unneededModules(p bootparams.Params) map[string]bool {
	skip := map[string]bool{}
	if p.VsockPort == 0 {
		for _, m := range []string{"vmw_vsock_virtio_transport", "vmw_vsock_virtio_transport_common", "vsock"} {
			skip[m] = true
		}
	}
	if p.SerialPort == "" {
		skip["virtio_console"] = true
	}
	if !p.Network.Enabled() {
		for _, m := range []string{"virtio_net", "net_failover", "failover"} {
			skip[m] = true
		}
	}
	if len(p.Shares) == 0 {
		skip["virtiofs"] = true
	}
	return skip
}

// moduleDepends returns the module names in the "depends=" entry of a
// module's .modinfo section (NUL-separated key=value strings). A miss is
// harmless: the module then fails with ENOENT and is loaded again after
// the others.
func moduleDepends(data []byte) []string {
	const key = "\x00depends="
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return nil
	}
	rest := data[i+len(key):]
	end := bytes.IndexByte(rest, 0)
	if end <= 0 {
		return nil
	}
	var deps []string
	for d := range strings.SplitSeq(string(rest[:end]), ",") {
		if d != "" {
			deps = append(deps, strings.ReplaceAll(d, "-", "_"))
		}
	}
	return deps
}

// loadModulesConcurrently loads files (paths in dependency order), each
// as soon as the modules it depends on are in: drivers whose devices take
// long to probe no longer hold up the rest. Modules whose load failed are
// tried once more, in order, after all others, which covers a dependency
// the .modinfo scan missed. It returns how many loaded, the failures and
// when each load ended and how long it ran (for the boot breakdown).
func loadModulesConcurrently(files []string) (int, map[string]error, []agentproto.BootPhase) {
	type mod struct {
		path       string
		deps       []int
		done       chan struct{}
		err        error
		start, end float64
	}
	mods := make([]*mod, len(files))
	index := map[string]int{}
	for i, f := range files {
		mods[i] = &mod{path: f, done: make(chan struct{})}
		index[moduleNameOf(f)] = i
	}
	for i, m := range mods {
		data, err := os.ReadFile(m.path)
		if err != nil {
			continue // the load reports it
		}
		for _, d := range moduleDepends(data) {
			// Only earlier modules: the order file is dependency order, so
			// this can't wait in a cycle.
			if j, ok := index[d]; ok && j < i {
				m.deps = append(m.deps, j)
			}
		}
	}
	var wg sync.WaitGroup
	for _, m := range mods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(m.done)
			for _, j := range m.deps {
				<-mods[j].done
			}
			m.start = BootClock()
			m.err = loadModule(m.path)
			m.end = BootClock()
		}()
	}
	wg.Wait()
	n := 0
	failed := map[string]error{}
	var times []agentproto.BootPhase
	for _, m := range mods {
		times = append(times, agentproto.BootPhase{Name: "module " + moduleNameOf(m.path), Seconds: m.end, Took: m.end - m.start})
		if m.err != nil && errors.Is(m.err, unix.ENOENT) {
			m.err = loadModule(m.path) // a dependency may have been late
		}
		if m.err != nil {
			failed[filepath.Base(m.path)] = m.err
			continue
		}
		n++
	}
	return n, failed, times
}
