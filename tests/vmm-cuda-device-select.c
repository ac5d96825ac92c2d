/* SPDX-License-Identifier: MIT */
/*
 * The cuda backend picks its GPU by UUID ("GPU-..." as nvidia-smi -L
 * prints it, with or without the prefix, any case) or by ordinal, and
 * refuses an unknown UUID or an ordinal past the last device with -ENODEV,
 * leaking nothing.  The backend knows the GPU's PCI address in the
 * driver's "DDDD:BB:DD.F" form (the host tier's NUMA node follows it).
 * Skips (77) without a driver and a GPU.
 */
#include <ctype.h>

#include "tests/vmm-util.h"
#include "vmm/vmm.h"

int main(void)
{
	struct vmm_config cfg = { .kind = VMM_BACKEND_CUDA };
	struct vmm_backend *b;
	char uuid[64];
	const char *p;
	int err, fds;

	cfg.libcuda_path = getenv("KVMM_LIBCUDA");
	err = vmm_backend_open(&cfg, &b);
	if (err == -ENODEV || err == -ENOTSUP)
		t_skip("no CUDA driver or GPU (vmm_cuda_open: %s)",
		       strerror(-err));
	t_ok(err);
	/* device_name is "NAME GPU-uuid". */
	p = strstr(b->device_name, " GPU-");
	t_assert(p != NULL);
	snprintf(uuid, sizeof(uuid), "%s", p + 1);
	t_assert_eq(strlen(uuid), 40);
	t_assert_eq(strlen(b->pci_bus_id), 12);
	for (size_t i = 0; i < 12; i++)
		t_assert(i == 4 || i == 7 ? b->pci_bus_id[i] == ':' :
			 i == 10	  ? b->pci_bus_id[i] == '.' :
				   isxdigit((unsigned char)b->pci_bus_id[i]));
	vmm_backend_close(b);
	fds = vt_count_fds();

	snprintf(cfg.gpu_uuid, sizeof(cfg.gpu_uuid), "%s", uuid);
	t_ok(vmm_backend_open(&cfg, &b));
	t_assert(strstr(b->device_name, uuid) != NULL);
	vmm_backend_close(b);

	/* Without the prefix, upper case. */
	for (size_t i = 0; uuid[i + 4]; i++)
		cfg.gpu_uuid[i] = (char)toupper((unsigned char)uuid[i + 4]);
	cfg.gpu_uuid[strlen(uuid) - 4] = 0;
	t_ok(vmm_backend_open(&cfg, &b));
	t_assert(strstr(b->device_name, uuid) != NULL);
	vmm_backend_close(b);

	snprintf(cfg.gpu_uuid, sizeof(cfg.gpu_uuid),
		 "GPU-ffffffff-ffff-ffff-ffff-fffffffffffe");
	t_assert_eq(vmm_backend_open(&cfg, &b), -ENODEV);

	cfg.gpu_uuid[0] = 0;
	cfg.cuda_device = 4096;
	t_assert_eq(vmm_backend_open(&cfg, &b), -ENODEV);
	cfg.cuda_device = -1;
	t_assert_eq(vmm_backend_open(&cfg, &b), -ENODEV);
	t_assert_eq(vt_count_fds(), fds);
	return 0;
}
