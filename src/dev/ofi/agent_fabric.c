/* SPDX-License-Identifier: MIT */
/*
 * Opening libfabric for the agent: choosing a provider by endpoint type
 * and capabilities (FI_PROVIDER overrides), explaining why none fits,
 * registering memory with whatever mr_mode the provider asks, and the
 * host's addresses that the hello announces.
 */
#include "dev/ofi/agent_int.h"

/* ------------------------------------------------------------- libfabric */

int agent_fi_fail(const char *what, int ret)
{
	agent_say("%s: %s (%d)", what, fi_strerror(-ret), ret);
	return -1;
}

static struct fi_info *hints_new(int delivery)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	h->mode = MODES;
	h->domain_attr->mr_mode = MR_MODES;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	if (delivery)
		h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	return h;
}

static int is_sockets(const char *p)
{
	return p && (!strcmp(p, "sockets") || strstr(p, "sockets;") ||
	             strstr(p, ";sockets"));
}

/* No provider fits at @node: ask with less and name what is missing. */
static int explain_none(const char *node, const char *svc)
{
	const char *env = ntbx_setting_str(NTBX_SET_FI_PROVIDER);
	struct fi_info *h = fi_allocinfo(), *all = NULL;
	if (!h)
		return -1;
	h->ep_attr->type = FI_EP_RDM;
	h->mode = ~0ull;
	h->domain_attr->mr_mode = MR_MODES | FI_MR_RAW | FI_MR_MMU_NOTIFY |
	                          FI_MR_RMA_EVENT | FI_MR_HMEM | FI_MR_COLLECTIVE;
	int r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, h, &all);
	fi_freeinfo(h);
	if (r || !all) {
		if (env)
			agent_say("provider %s (FI_PROVIDER) offers no RDM endpoint with RMA at "
			    "%s (fi_getinfo: %s)", env, node, fi_strerror(-r));
		else
			agent_say("no libfabric provider offers an RDM endpoint with RMA at %s "
			    "(fi_getinfo: %s)", node, fi_strerror(-r));
		return -1;
	}
	struct fi_info *i = all;
	const char *pn = i->fabric_attr->prov_name;
	char mb[64];
	snprintf(mb, sizeof mb, "0x%" PRIx64, (uint64_t)i->domain_attr->mr_mode);
	if (!(i->caps & FI_RMA))
		agent_say("provider %s at %s lacks FI_RMA (RMA reads and writes), which the "
		    "ofi backend needs", pn, node);
	else if (!(i->caps & FI_READ) || !(i->caps & FI_REMOTE_READ))
		agent_say("provider %s at %s lacks FI_READ/FI_REMOTE_READ (RMA reads), which "
		    "the ofi backend needs", pn, node);
	else if (i->domain_attr->cq_data_size < 4)
		agent_say("provider %s at %s lacks remote CQ data (cq_data_size %zu, 4 "
		    "needed for doorbells)", pn, node, i->domain_attr->cq_data_size);
	else if (i->mode & FI_RX_CQ_DATA)
		agent_say("provider %s at %s needs FI_RX_CQ_DATA (posted receives for remote "
		    "CQ data), which the ofi backend does not post", pn, node);
	else if (i->domain_attr->mr_mode & ~(uint64_t)MR_MODES)
		agent_say("provider %s at %s asks mr_mode %s, beyond what the ofi backend "
		    "handles (FI_MR_LOCAL|VIRT_ADDR|PROV_KEY|ALLOCATED|ENDPOINT)", pn,
		    node, mb);
	else
		agent_say("provider %s at %s does not fit (caps 0x%" PRIx64 ", mode 0x%"
		    PRIx64 ")", pn, node, (uint64_t)i->caps, (uint64_t)i->mode);
	fi_freeinfo(all);
	return -1;
}

int agent_fab_open(const char *node, unsigned port)
{
	char svc[16];
	snprintf(svc, sizeof svc, "%u", port);
	struct fi_info *all = NULL, *pick = NULL;
	int r = -FI_ENODATA;
	/* FI_DELIVERY_COMPLETE: a write's completion means the bytes are in
	 * the peer's memory, as ntbx_dma_write promises; NTBX_OFI_DELIVERY=0
	 * measures what that costs (transmit completion: not the contract) */
	int want_delivery = ntbx_setting_bool(NTBX_SET_OFI_DELIVERY);
	for (int delivery = want_delivery; delivery >= 0 && (r || !all); delivery--) {
		struct fi_info *h = hints_new(delivery);
		if (!h)
			return -1;
		r = fi_getinfo(OFI_API, node, svc, FI_SOURCE, h, &all);
		fi_freeinfo(h);
	}
	if (r == -FI_ENODATA || (!r && !all))
		return explain_none(node, svc);
	if (r)
		return agent_fi_fail("fi_getinfo", r);
	if (ntbx_setting_str(NTBX_SET_FI_PROVIDER))
		pick = all;
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!strcmp(i->fabric_attr->prov_name, "tcp;ofi_rxm"))
			pick = i;
	for (struct fi_info *i = all; i && !pick; i = i->next)
		if (!is_sockets(i->fabric_attr->prov_name))
			pick = i;
	if (!pick) {
		agent_say("only the sockets provider offers RMA at %s (1000x slower); set "
		    "FI_PROVIDER=sockets to use it anyway", node);
		fi_freeinfo(all);
		return -1;
	}
	const char *pn = pick->fabric_attr->prov_name;
	if (pick->domain_attr->cq_data_size < 4) {
		agent_say("provider %s at %s lacks remote CQ data (cq_data_size %zu, 4 "
		    "needed for doorbells)", pn, node, pick->domain_attr->cq_data_size);
		fi_freeinfo(all);
		return -1;
	}
	if (pick->domain_attr->mr_key_size > 8) {
		agent_say("provider %s at %s uses %zu-byte memory keys (FI_MR_RAW), not "
		    "supported", pn, node, pick->domain_attr->mr_key_size);
		fi_freeinfo(all);
		return -1;
	}
	ag.info = fi_dupinfo(pick);
	fi_freeinfo(all);
	struct fi_info *i = ag.info;
	ag.mr_mode = i->domain_attr->mr_mode;
	uint64_t o = i->tx_attr->msg_order & i->rx_attr->msg_order;
	ag.ordered = !!(o & (FI_ORDER_WAW | FI_ORDER_RMA_WAW));
	ag.max_msg = i->ep_attr->max_msg_size ? i->ep_attr->max_msg_size : SIZE_MAX;
	/* NTBX_OFI_MAX_MSG: a smaller limit than the provider's, to test the
	 * split (tcp;ofi_rxm and shm say SIZE_MAX and have no knob for it) */
	long mm = ntbx_setting_long(NTBX_SET_OFI_MAX_MSG);
	if (mm > 0 && (size_t)mm < ag.max_msg) {
		ag.max_msg = (size_t)mm;
		agent_say("transfers split at %zu bytes (NTBX_OFI_MAX_MSG)", ag.max_msg);
	}
	if ((r = fi_fabric(i->fabric_attr, &ag.fabric, NULL)))
		return agent_fi_fail("fi_fabric", r);
	if ((r = fi_domain(ag.fabric, i, &ag.domain, NULL)))
		return agent_fi_fail("fi_domain", r);
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_DATA,
	                          .wait_obj = FI_WAIT_FD, .size = 8192 };
	ag.cq_fd = -1;
	if (fi_cq_open(ag.domain, &cqa, &ag.cq, NULL) == 0) {
		if (fi_control(&ag.cq->fid, FI_GETWAIT, &ag.cq_fd) != 0)
			ag.cq_fd = -1;
	} else {
		cqa.wait_obj = FI_WAIT_NONE;
		if ((r = fi_cq_open(ag.domain, &cqa, &ag.cq, NULL)))
			return agent_fi_fail("fi_cq_open", r);
	}
	struct fi_av_attr ava = {
		.type = i->domain_attr->av_type == FI_AV_UNSPEC ? FI_AV_MAP
		                                                : i->domain_attr->av_type,
		.count = NTBX_MAX_NODES * 2,
	};
	if ((r = fi_av_open(ag.domain, &ava, &ag.av, NULL)))
		return agent_fi_fail("fi_av_open", r);
	if ((r = fi_endpoint(ag.domain, i, &ag.ep, NULL)))
		return agent_fi_fail("fi_endpoint", r);
	if ((r = fi_ep_bind(ag.ep, &ag.av->fid, 0)))
		return agent_fi_fail("fi_ep_bind(av)", r);
	if ((r = fi_ep_bind(ag.ep, &ag.cq->fid, FI_TRANSMIT | FI_RECV)))
		return agent_fi_fail("fi_ep_bind(cq)", r);
	if ((r = fi_enable(ag.ep)))
		return agent_fi_fail("fi_enable", r);
	return 0;
}

int agent_mr_reg(void *buf, size_t len, uint64_t access, uint64_t key,
                  struct fid_mr **mr, void **desc)
{
	int r = fi_mr_reg(ag.domain, buf, len, access, 0,
	                  (ag.mr_mode & FI_MR_PROV_KEY) ? 0 : key, 0, mr, NULL);
	if (r)
		return agent_fi_fail("fi_mr_reg", r);
	if (ag.mr_mode & FI_MR_ENDPOINT) {
		if ((r = fi_mr_bind(*mr, &ag.ep->fid, 0)))
			return agent_fi_fail("fi_mr_bind", r);
		if ((r = fi_mr_enable(*mr)))
			return agent_fi_fail("fi_mr_enable", r);
	}
	*desc = fi_mr_desc(*mr);
	if (fi_mr_key(*mr) == FI_KEY_NOTAVAIL) {
		agent_say("provider %s gives no 64-bit memory key",
		    ag.info->fabric_attr->prov_name);
		return -1;
	}
	return 0;
}

void agent_local_addrs(struct hello *h)
{
	struct ifaddrs *ifa;
	if (getifaddrs(&ifa) < 0)
		return;
	static const uint8_t v4map[12] = { 0,0,0,0,0,0,0,0,0,0,0xff,0xff };
	uint32_t n = 0;
	for (struct ifaddrs *i = ifa; i && n < NTBX_NODE_ADDRS; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		struct ntbx_node_addr a = { 0 };
		if (i->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)i->ifa_addr;
			memcpy(a.addr, v4map, 12);
			memcpy(a.addr + 12, &s->sin_addr, 4);
			if (a.addr[12] == 127 || !s->sin_addr.s_addr)
				continue;
			a.family = AF_INET;
			a.prefix = 32;
		} else if (i->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *s = (const void *)i->ifa_addr;
			if (IN6_IS_ADDR_LOOPBACK(&s->sin6_addr) ||
			    IN6_IS_ADDR_LINKLOCAL(&s->sin6_addr))
				continue;
			memcpy(a.addr, &s->sin6_addr, 16);
			a.family = AF_INET6;
			a.prefix = 128;
		} else {
			continue;
		}
		h->addrs[n++] = a;
	}
	freeifaddrs(ifa);
	h->naddrs = n;
}
