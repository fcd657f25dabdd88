//go:build linux

package boot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/osaurus/osaurus-sandbox/agentproto"
	"github.com/osaurus/osaurus-sandbox/guestagent"
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

// policyModules are the modules only the network policy uses: veth for
// each agent's namespace, nftables with NAT, reject and NFLOG for its rules
// (provision/kmod.OptionalGuestModules ships them). Nothing in boot needs
// them, and under TCG they are a good part of the module loading time
// (nf_tables and nf_conntrack alone are 1 MiB), so they and the modules
// only they need are loaded after the host's first hello; the policy
// waits for them before it uses them.
var policyModules = []string{"veth", "nf_tables", "nft_chain_nat", "nft_masq", "nft_reject_inet", "nft_log", "nfnetlink_log"}

// moduleFile is one module of the initramfs.
type moduleFile struct {
	path string
	name string
	deps []string // from its .modinfo
	// f is the module kept open across the root switch, which deletes
	// the initramfs's files; nil means open path when loading.
	f *os.File
}

// readModules reads each module's dependencies.
func readModules(paths []string) []moduleFile {
	mods := make([]moduleFile, len(paths))
	for i, p := range paths {
		mods[i] = moduleFile{path: p, name: moduleNameOf(p)}
		if data, err := os.ReadFile(p); err == nil {
			mods[i].deps = moduleDepends(data) // else the load reports it
		}
	}
	return mods
}

// splitDeferred splits mods (dependency order) into those boot needs now
// and those only the network policy needs, which can wait: a module is
// deferred when a policy module needs it (or is one) and nothing else
// does. Both keep their order.
func splitDeferred(mods []moduleFile) (now, later []moduleFile) {
	byName := map[string]moduleFile{}
	for _, m := range mods {
		byName[m.name] = m
	}
	closure := func(roots []string) map[string]bool {
		seen := map[string]bool{}
		var visit func(string)
		visit = func(n string) {
			m, ok := byName[n]
			if !ok || seen[n] {
				return
			}
			seen[n] = true
			for _, d := range m.deps {
				visit(d)
			}
		}
		for _, r := range roots {
			visit(r)
		}
		return seen
	}
	policy := closure(policyModules)
	var others []string
	for _, m := range mods {
		if !policy[m.name] {
			others = append(others, m.name)
		}
	}
	needed := closure(others)
	for _, m := range mods {
		if policy[m.name] && !needed[m.name] {
			later = append(later, m)
		} else {
			now = append(now, m)
		}
	}
	return now, later
}

// loadModulesConcurrently loads mods (in dependency order), each as soon
// as the modules it depends on are in: drivers whose devices take long to
// probe no longer hold up the rest. Modules whose load failed are tried
// once more, in order, after all others, which covers a dependency the
// .modinfo scan missed. It returns how many loaded, the failures and when
// each load ended and how long it ran (for the boot breakdown).
func loadModulesConcurrently(list []moduleFile) (int, map[string]error, []agentproto.BootPhase) {
	type mod struct {
		moduleFile
		deps       []int
		done       chan struct{}
		err        error
		start, end float64
	}
	mods := make([]*mod, len(list))
	index := map[string]int{}
	for i, f := range list {
		mods[i] = &mod{moduleFile: f, done: make(chan struct{})}
		index[f.name] = i
	}
	for i, m := range mods {
		for _, d := range m.moduleFile.deps {
			// Only earlier modules: the order file is dependency order, so
			// this can't wait in a cycle. Modules outside list are loaded
			// already.
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
			m.start = guestagent.BootClock()
			m.err = m.load()
			m.end = guestagent.BootClock()
		}()
	}
	wg.Wait()
	n := 0
	failed := map[string]error{}
	var times []agentproto.BootPhase
	for _, m := range mods {
		times = append(times, agentproto.BootPhase{Name: "module " + m.name, Seconds: m.end, Took: m.end - m.start})
		if m.err != nil && errors.Is(m.err, unix.ENOENT) {
			m.err = m.load() // a dependency may have been late
		}
		if m.f != nil {
			m.f.Close()
		}
		if m.err != nil {
			failed[filepath.Base(m.path)] = m.err
			continue
		}
		n++
	}
	return n, failed, times
}

func (m moduleFile) load() error {
	if m.f == nil {
		return loadModule(m.path)
	}
	return loadModuleFile(m.f, m.path)
}
