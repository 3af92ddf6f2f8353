// SPDX-License-Identifier: GPL-2.0-only
/// Find calls that may sleep while the task is not TASK_RUNNING: in the
/// condition of a wait_event*() macro (and in the cmd that runs before
/// schedule() in the _cmd forms), between prepare_to_wait*() and
/// schedule()/finish_wait(), and between set_current_state(TASK_*) and
/// schedule().  The inner sleep returns in TASK_RUNNING, so the outer
/// schedule() returns at once and the loop makes an extra pass: a busy poll
/// while the inner call keeps sleeping.  With CONFIG_DEBUG_ATOMIC_SLEEP the
/// kernel warns "do not call blocking ops when !TASK_RUNNING".
///
/// The usual fix is the wait_woken() pattern (commit 61ada528dea0
/// ("sched/wait: Provide infrastructure to deal with nested blocking")):
/// DEFINE_WAIT_FUNC(wait, woken_wake_function); add_wait_queue(&wq, &wait);
/// loop { if (cond) break; wait_woken(&wait, state, timeout); }
/// remove_wait_queue(&wq, &wait);
///
//# Run on its own, by the kernel's "make coccicheck", this rule only knows the
//# sleeping primitives listed in its initializer (generated from
//# cocci/sleep_info.json) and reaches what locks/call_kern.cocci reaches: a
//# primitive called directly in the condition or window, or through a
//# function defined in the same file (one level).  nestsleep's driver
//# (scripts/nestsleep/) adds the whole-tree knowledge: helpers in other
//# files, deeper chains, static inlines, macros and ops-table function
//# pointers.
//#
//# False positives arise when the sleeping path cannot run while the state is
//# set (flag-dependent sleeps), when a helper restores TASK_RUNNING itself
//# before it sleeps, and for chains through function pointers, which are
//# resolved by struct type and member and may name a target that is never
//# reached from this site.  Sites that call sched_annotate_sleep(), the
//# kernel's "checked and harmless" annotation, are not reported.  The
//# driver drops chains that the constants passed along them rule out (a
//# flag bit, an enumerator, NULL, a non-blocking gfp, BUG_ON()), and calls
//# that a second test of the setter's own unmodified condition keeps out
//# of the window; it trusts that distinct enumerators differ and that
//# nothing outside the function changes a condition it tests twice.  A
//# value the driver cannot see (a struct field, a value computed at run
//# time, the return value of a callee) is not followed.
//#
//# wait_woken() is not always the right fix: where the inner sleep is rare and
//# a re-loop harmless, maintainers have accepted sched_annotate_sleep(); where
//# the condition runs under a spinlock (the _lock_irq and _locked forms) a
//# sleeping condition is a sleep in atomic context, which wait_woken() does
//# not fix, and is reported as such.
//#
//# spatch 1.1.1 cannot parse the cleanup.h guards (6.5+) and drops a whole
//# function that uses scoped_guard().  Pass --macro-file
//# cocci/nestsleep.macros.h (nestsleep's driver does): it keeps such
//# functions, but a mutex scoped_guard() written directly in a wait window
//# is then not seen; one in a helper is.
//#
//# MODE=patch alone rewrites a wait_event*() site into the wait_woken() form
//# (a copy of cocci/fix_wait_event.cocci's rules) only when, from the file
//# alone, its task cannot be woken through a stored task pointer: the wait
//# is in no thread function and in no function that stores current or a
//# task pointer, and the file calls no wake_up_process(), wake_up_state()
//# or wake_q_add().  wait_woken() is reliably woken only through its queue:
//# a wake_up_process() that lands while the rewritten loop tests its
//# condition is lost: wait_woken() sets the state (kernel/sched/wait.c:462)
//# and sleeps (kernel/sched/wait.c:464) testing only WQ_FLAG_WOKEN.
//# Wakers outside the file are not checked: a task pointer stored by a
//# caller in another file, timers and wakers in other files can still lose
//# a wakeup after the rewrite.  Every other site is
//# listed as an INFO line with the reason, and so are the prepare_to_wait()
//# and set_current_state() loops, which need the whole tree's wakers:
//# nestsleep's "make coccicheck MODE=patch" (scripts/nestsleep/fix/fixer.py)
//# rewrites those, with the wakers it finds in the whole tree.  Both may be
//# wrong in the same ways the kernel's locks/call_kern.cocci fix may be; an
//# exclusive wait converted to add_wait_queue_exclusive() may swallow a
//# wakeup when it leaves on a signal, so one that tests a signal is left
//# alone.  Alone, an unbraced if arm that held the wait gets braces, its
//# other arm does not.  Several waits of a function are rewritten in one run,
//# but where one of them is left as it is (an INFO line says why), a wait
//# that reads the same (waiter, queue and condition) waits for a second
//# run, with an INFO line.
// Confidence: Moderate
// Copyright: (C) 2026 The nestsleep developers.
// URL: https://coccinelle.gitlabpages.inria.fr/website
// Comments: Requires Python scripting. Set NESTSLEEP_RAW=1 to print the
// Comments: raw candidate calls as JSON lines for scripts/nestsleep/analysis/match.py.
// Options: --no-includes --include-headers

virtual context
virtual org
virtual report
virtual patch
// fix_wait_event.cocci's brace balancing, which its driver asks for; alone
// it is never defined, and spatch braces only the arm that held the wait
virtual balance

@initialize:python@
@@
import json
import os
import re

# BEGIN GENERATED from cocci/sleep_info.json by python3 -m nestsleep gen-builtin; do not edit
NS_SLEEPERS = {
    '__copy_from_user': ('user_copy', 'warns'),
    '__copy_to_user': ('user_copy', 'warns'),
    '__might_fault': ('might_sleep', 'warns'),
    '__might_sleep': ('might_sleep', 'warns'),
    '__mutex_lock': ('mutex', 'warns'),
    '__wait_event': ('wait_event_nocheck', 'silent'),
    '__wait_event_idle': ('wait_event_nocheck', 'silent'),
    '__wait_event_interruptible': ('wait_event_nocheck', 'silent'),
    '__wait_event_interruptible_timeout': ('wait_event_nocheck', 'silent'),
    '__wait_event_killable': ('wait_event_nocheck', 'silent'),
    '__wait_event_timeout': ('wait_event_nocheck', 'silent'),
    '_mutex_lock_nest_lock': ('mutex', 'warns'),
    'blk_io_schedule': ('schedule', 'silent'),
    'cancel_delayed_work_sync': ('workqueue', 'warns'),
    'cancel_work_sync': ('workqueue', 'warns'),
    'clear_user': ('user_copy', 'warns'),
    'copy_from_sockptr': ('user_copy', 'warns'),
    'copy_from_user': ('user_copy', 'warns'),
    'copy_struct_from_user': ('user_copy', 'warns'),
    'copy_to_sockptr': ('user_copy', 'warns'),
    'copy_to_user': ('user_copy', 'warns'),
    'destroy_workqueue': ('workqueue', 'warns'),
    'down': ('semaphore', 'warns'),
    'down_interruptible': ('semaphore', 'warns'),
    'down_killable': ('semaphore', 'warns'),
    'down_read': ('rwsem', 'warns'),
    'down_read_interruptible': ('rwsem', 'warns'),
    'down_read_killable': ('rwsem', 'warns'),
    'down_read_killable_nested': ('rwsem', 'warns'),
    'down_read_nested': ('rwsem', 'warns'),
    'down_read_non_owner': ('rwsem', 'warns'),
    'down_timeout': ('semaphore', 'warns'),
    'down_write': ('rwsem', 'warns'),
    'down_write_killable': ('rwsem', 'warns'),
    'down_write_nest_lock': ('rwsem', 'warns'),
    'down_write_nested': ('rwsem', 'warns'),
    'drain_workqueue': ('workqueue', 'warns'),
    'flush_delayed_work': ('workqueue', 'warns'),
    'flush_rcu_work': ('workqueue', 'warns'),
    'flush_scheduled_work': ('workqueue', 'warns'),
    'flush_work': ('workqueue', 'warns'),
    'flush_workqueue': ('workqueue', 'warns'),
    'freezable_schedule': ('schedule', 'silent'),
    'freezable_schedule_timeout': ('schedule', 'silent'),
    'freezable_schedule_unsafe': ('schedule', 'silent'),
    'fsleep': ('sleep', 'silent'),
    'get_user': ('user_copy', 'warns'),
    'io_schedule': ('schedule', 'silent'),
    'io_schedule_timeout': ('schedule', 'silent'),
    'io_wait_event': ('wait_event', 'warns'),
    'ioremap': ('ioremap', 'warns'),
    'ioremap_cache': ('ioremap', 'warns'),
    'ioremap_encrypted': ('ioremap', 'warns'),
    'ioremap_prot': ('ioremap', 'warns'),
    'ioremap_uc': ('ioremap', 'warns'),
    'ioremap_wc': ('ioremap', 'warns'),
    'ioremap_wt': ('ioremap', 'warns'),
    'iounmap': ('ioremap', 'warns'),
    'kthread_cancel_delayed_work_sync': ('workqueue', 'warns'),
    'kthread_cancel_work_sync': ('workqueue', 'warns'),
    'kthread_flush_work': ('workqueue', 'warns'),
    'kthread_flush_worker': ('workqueue', 'warns'),
    'kthread_park': ('workqueue', 'warns'),
    'kthread_stop': ('workqueue', 'warns'),
    'kvfree': ('vmalloc', 'warns'),
    'lock_sock': ('socket_lock', 'warns'),
    'lock_sock_fast': ('socket_lock', 'warns'),
    'lock_sock_nested': ('socket_lock', 'warns'),
    'memdup_user': ('user_copy', 'warns'),
    'memdup_user_nul': ('user_copy', 'warns'),
    'might_fault': ('might_sleep', 'warns'),
    'might_sleep': ('might_sleep', 'warns'),
    'might_sleep_if': ('might_sleep', 'warns'),
    'msleep': ('sleep', 'silent'),
    'msleep_interruptible': ('sleep', 'silent'),
    'mutex_lock': ('mutex', 'warns'),
    'mutex_lock_interruptible': ('mutex', 'warns'),
    'mutex_lock_interruptible_nested': ('mutex', 'warns'),
    'mutex_lock_io': ('mutex', 'warns'),
    'mutex_lock_io_nested': ('mutex', 'warns'),
    'mutex_lock_killable': ('mutex', 'warns'),
    'mutex_lock_killable_nested': ('mutex', 'warns'),
    'mutex_lock_nest_lock': ('mutex', 'warns'),
    'mutex_lock_nested': ('mutex', 'warns'),
    'percpu_down_read': ('rwsem', 'warns'),
    'percpu_down_write': ('rwsem', 'warns'),
    'prepare_to_wait': ('wait_event_nocheck', 'silent'),
    'prepare_to_wait_event': ('wait_event_nocheck', 'silent'),
    'prepare_to_wait_exclusive': ('wait_event_nocheck', 'silent'),
    'put_user': ('user_copy', 'warns'),
    'rcu_barrier': ('rcu', 'warns'),
    'rcuwait_wait_event': ('wait_event_nocheck', 'silent'),
    'rt_mutex_lock': ('mutex', 'warns'),
    'rt_mutex_lock_interruptible': ('mutex', 'warns'),
    'rt_mutex_lock_killable': ('mutex', 'warns'),
    'rt_mutex_lock_nested': ('mutex', 'warns'),
    'schedule': ('schedule', 'silent'),
    'schedule_hrtimeout': ('schedule', 'silent'),
    'schedule_hrtimeout_range': ('schedule', 'silent'),
    'schedule_hrtimeout_range_clock': ('schedule', 'silent'),
    'schedule_preempt_disabled': ('schedule', 'silent'),
    'schedule_timeout': ('schedule', 'silent'),
    'schedule_timeout_idle': ('schedule', 'silent'),
    'schedule_timeout_interruptible': ('schedule', 'silent'),
    'schedule_timeout_killable': ('schedule', 'silent'),
    'schedule_timeout_uninterruptible': ('schedule', 'silent'),
    'srcu_barrier': ('rcu', 'warns'),
    'ssleep': ('sleep', 'silent'),
    'strncpy_from_user': ('user_copy', 'warns'),
    'strndup_user': ('user_copy', 'warns'),
    'strnlen_user': ('user_copy', 'warns'),
    'swait_event_exclusive': ('wait_event_nocheck', 'silent'),
    'swait_event_idle_exclusive': ('wait_event_nocheck', 'silent'),
    'swait_event_idle_timeout_exclusive': ('wait_event_nocheck', 'silent'),
    'swait_event_interruptible_exclusive': ('wait_event_nocheck', 'silent'),
    'swait_event_interruptible_timeout_exclusive': ('wait_event_nocheck', 'silent'),
    'swait_event_timeout_exclusive': ('wait_event_nocheck', 'silent'),
    'synchronize_irq': ('rcu', 'warns'),
    'synchronize_net': ('rcu', 'warns'),
    'synchronize_rcu': ('rcu', 'warns'),
    'synchronize_rcu_expedited': ('rcu', 'warns'),
    'synchronize_rcu_tasks': ('rcu', 'warns'),
    'synchronize_rcu_tasks_trace': ('rcu', 'warns'),
    'synchronize_srcu': ('rcu', 'warns'),
    'synchronize_srcu_expedited': ('rcu', 'warns'),
    'try_to_freeze': ('might_sleep', 'warns'),
    'usleep_idle_range': ('sleep', 'silent'),
    'usleep_range': ('sleep', 'silent'),
    'usleep_range_state': ('sleep', 'silent'),
    'vfree': ('vmalloc', 'warns'),
    'vmalloc': ('vmalloc', 'warns'),
    'vmalloc_node': ('vmalloc', 'warns'),
    'vmalloc_user': ('vmalloc', 'warns'),
    'vmap': ('vmalloc', 'warns'),
    'vmemdup_user': ('user_copy', 'warns'),
    'vunmap': ('vmalloc', 'warns'),
    'vzalloc': ('vmalloc', 'warns'),
    'vzalloc_node': ('vmalloc', 'warns'),
    'wait_event': ('wait_event', 'warns'),
    'wait_event_cmd': ('wait_event_nocheck', 'silent'),
    'wait_event_exclusive_cmd': ('wait_event_nocheck', 'silent'),
    'wait_event_freezable': ('wait_event', 'warns'),
    'wait_event_freezable_exclusive': ('wait_event', 'warns'),
    'wait_event_freezable_timeout': ('wait_event', 'warns'),
    'wait_event_hrtimeout': ('wait_event', 'warns'),
    'wait_event_idle': ('wait_event', 'warns'),
    'wait_event_idle_exclusive': ('wait_event', 'warns'),
    'wait_event_idle_exclusive_timeout': ('wait_event', 'warns'),
    'wait_event_idle_timeout': ('wait_event', 'warns'),
    'wait_event_interruptible': ('wait_event', 'warns'),
    'wait_event_interruptible_exclusive': ('wait_event', 'warns'),
    'wait_event_interruptible_exclusive_locked': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_exclusive_locked_irq': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_hrtimeout': ('wait_event', 'warns'),
    'wait_event_interruptible_lock_irq': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_lock_irq_cmd': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_lock_irq_timeout': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_locked': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_locked_irq': ('wait_event_nocheck', 'silent'),
    'wait_event_interruptible_timeout': ('wait_event', 'warns'),
    'wait_event_killable': ('wait_event', 'warns'),
    'wait_event_killable_exclusive': ('wait_event', 'warns'),
    'wait_event_killable_timeout': ('wait_event', 'warns'),
    'wait_event_lock_irq': ('wait_event_nocheck', 'silent'),
    'wait_event_lock_irq_cmd': ('wait_event_nocheck', 'silent'),
    'wait_event_lock_irq_timeout': ('wait_event_nocheck', 'silent'),
    'wait_event_state': ('wait_event', 'warns'),
    'wait_event_timeout': ('wait_event', 'warns'),
    'wait_for_completion': ('completion', 'warns'),
    'wait_for_completion_interruptible': ('completion', 'warns'),
    'wait_for_completion_interruptible_timeout': ('completion', 'warns'),
    'wait_for_completion_io': ('completion', 'warns'),
    'wait_for_completion_io_timeout': ('completion', 'warns'),
    'wait_for_completion_killable': ('completion', 'warns'),
    'wait_for_completion_killable_timeout': ('completion', 'warns'),
    'wait_for_completion_state': ('completion', 'warns'),
    'wait_for_completion_timeout': ('completion', 'warns'),
    'wait_on_bit': ('wait_event', 'warns'),
    'wait_on_bit_action': ('wait_event', 'warns'),
    'wait_on_bit_io': ('wait_event', 'warns'),
    'wait_on_bit_lock': ('wait_event', 'warns'),
    'wait_on_bit_lock_action': ('wait_event', 'warns'),
    'wait_on_bit_lock_io': ('wait_event', 'warns'),
    'wait_on_bit_timeout': ('wait_event', 'warns'),
    'wait_var_event': ('wait_event', 'warns'),
    'wait_var_event_interruptible': ('wait_event', 'warns'),
    'wait_var_event_killable': ('wait_event', 'warns'),
    'wait_var_event_timeout': ('wait_event', 'warns'),
    'ww_mutex_lock': ('mutex', 'warns'),
    'ww_mutex_lock_interruptible': ('mutex', 'warns'),
    'ww_mutex_lock_slow': ('mutex', 'warns'),
    'ww_mutex_lock_slow_interruptible': ('mutex', 'warns'),
}
NS_GFP_ARG = {
    '__alloc_pages': 0,
    '__alloc_skb': 1,
    '__get_free_page': 0,
    '__get_free_pages': 0,
    'alloc_page': 0,
    'alloc_pages': 0,
    'alloc_pages_node': 1,
    'alloc_skb': 1,
    'bio_alloc': 3,
    'bio_alloc_bioset': 3,
    'devm_kasprintf': 1,
    'devm_kcalloc': 3,
    'devm_kmalloc': 2,
    'devm_kmalloc_array': 3,
    'devm_kmemdup': 3,
    'devm_kstrdup': 2,
    'devm_kzalloc': 2,
    'dma_alloc_coherent': 3,
    'dma_pool_alloc': 1,
    'dma_pool_zalloc': 1,
    'folio_alloc': 0,
    'get_zeroed_page': 0,
    'ida_alloc': 1,
    'ida_alloc_max': 2,
    'ida_alloc_min': 2,
    'ida_alloc_range': 3,
    'idr_alloc': 4,
    'idr_alloc_cyclic': 4,
    'kasprintf': 0,
    'kcalloc': 2,
    'kcalloc_node': 2,
    'kmalloc': 1,
    'kmalloc_array': 2,
    'kmalloc_array_node': 2,
    'kmalloc_node': 1,
    'kmalloc_track_caller': 1,
    'kmem_cache_alloc': 1,
    'kmem_cache_alloc_node': 1,
    'kmem_cache_zalloc': 1,
    'kmemdup': 2,
    'kmemdup_nul': 2,
    'krealloc': 2,
    'krealloc_array': 3,
    'kstrdup': 1,
    'kstrndup': 2,
    'kvasprintf': 0,
    'kvcalloc': 2,
    'kvmalloc': 1,
    'kvmalloc_array': 2,
    'kvmalloc_node': 1,
    'kvrealloc': 3,
    'kvzalloc': 1,
    'kvzalloc_node': 1,
    'kzalloc': 1,
    'kzalloc_node': 1,
    'mempool_alloc': 1,
    'pskb_copy': 1,
    'radix_tree_preload': 0,
    'sg_alloc_table': 2,
    'skb_clone': 1,
    'skb_copy': 1,
    'xa_alloc': 4,
    'xa_store': 3,
}
NS_BLOCKING_GFP = [
    'GFP_KERNEL', 'GFP_KERNEL_ACCOUNT', 'GFP_NOFS', 'GFP_NOIO', 'GFP_USER',
    'GFP_HIGHUSER', 'GFP_HIGHUSER_MOVABLE', 'GFP_TRANSHUGE',
    'GFP_TRANSHUGE_LIGHT', '__GFP_DIRECT_RECLAIM', '__GFP_RECLAIM',
]
NS_NOT_SLEEPING = [
    'BUG', '__bug', '__cond_resched', '__die', '__might_resched',
    '__stack_chk_fail', '__warn', '_printk', 'add_taint', 'add_wait_queue',
    'add_wait_queue_exclusive', 'bad_page', 'complete', 'complete_all',
    'cond_resched', 'cond_resched_lock', 'cond_resched_rcu',
    'debug_print_object', 'die', 'do_exit', 'down_read_trylock',
    'down_trylock', 'down_write_trylock', 'dump_stack', 'dump_stack_lvl',
    'end_report', 'fatal_signal_pending', 'fput', 'free_huge_folio',
    'freezing', 'kasan_check_range', 'kasan_report', 'kthread_should_stop',
    'kvfree_rcu_arg_2', 'lockdep_rcu_suspicious', 'make_task_dead',
    'memcmp', 'memcpy', 'memmove', 'memset', 'might_resched',
    'migrate_disable', 'migrate_enable', 'mutex_trylock', 'mutex_unlock',
    'nmi_panic', 'oops_end', 'panic', 'print_report', 'printk',
    'raw_spin_lock', 'raw_spin_lock_irq', 'raw_spin_lock_irqsave',
    'read_lock', 'read_unlock', 'read_unlock_bh', 'read_unlock_irq',
    'read_unlock_irqrestore', 'release_sock', 'remove_wait_queue',
    'report_bug', 'rt_read_unlock', 'rt_spin_unlock', 'rt_write_unlock',
    'scnprintf', 'signal_pending', 'snprintf', 'spin_lock', 'spin_lock_bh',
    'spin_lock_irq', 'spin_lock_irqsave', 'spin_unlock', 'spin_unlock_bh',
    'spin_unlock_irq', 'spin_unlock_irqrestore', 'sprintf', 'strcmp',
    'strcpy', 'strlcpy', 'strlen', 'strncmp', 'strncpy', 'strnlen',
    'strscpy', 'up', 'up_read', 'up_write', 'vpanic', 'wait_woken',
    'wake_up', 'wake_up_all', 'wake_up_interruptible', 'wake_up_process',
    'warn_slowpath_fmt', 'woken_wake_function', 'write_lock',
    'write_unlock', 'write_unlock_bh', 'write_unlock_irq',
    'write_unlock_irqrestore',
]
NS_RESTORE = [
    'schedule', 'io_schedule', 'schedule_preempt_disabled',
    'schedule_timeout', 'schedule_timeout_interruptible',
    'schedule_timeout_killable', 'schedule_timeout_uninterruptible',
    'schedule_timeout_idle', 'io_schedule_timeout', 'schedule_hrtimeout',
    'schedule_hrtimeout_range', 'freezable_schedule',
    'freezable_schedule_timeout', 'freezable_schedule_unsafe',
    'finish_wait', 'finish_swait', 'wait_woken', 'do_wait_intr',
    'do_wait_intr_irq', '__schedule', 'schedule_rtlock',
    'preempt_schedule_common', 'schedule_idle', 'blk_io_schedule',
    'schedule_hrtimeout_range_clock', 'memalloc_retry_wait',
]
NS_WAITERS = {
    'io_wait_event': (1, [
   
], ''),
    'rcuwait_wait_event': (1, [
   
], ''),
    'swait_event_exclusive': (1, [
   
], ''),
    'swait_event_idle_exclusive': (1, [
   
], ''),
    'swait_event_idle_timeout_exclusive': (1, [
   
], ''),
    'swait_event_interruptible_exclusive': (1, [
   
], ''),
    'swait_event_interruptible_timeout_exclusive': (1, [
   
], ''),
    'swait_event_timeout_exclusive': (1, [
   
], ''),
    'wait_event': (1, [
   
], ''),
    'wait_event_cmd': (1, [2], ''),
    'wait_event_exclusive_cmd': (1, [2], ''),
    'wait_event_freezable': (1, [
   
], ''),
    'wait_event_freezable_exclusive': (1, [
   
], ''),
    'wait_event_freezable_timeout': (1, [
   
], ''),
    'wait_event_hrtimeout': (1, [
   
], ''),
    'wait_event_idle': (1, [
   
], ''),
    'wait_event_idle_exclusive': (1, [
   
], ''),
    'wait_event_idle_exclusive_timeout': (1, [
   
], ''),
    'wait_event_idle_timeout': (1, [
   
], ''),
    'wait_event_interruptible': (1, [
   
], ''),
    'wait_event_interruptible_exclusive': (1, [
   
], ''),
    'wait_event_interruptible_exclusive_locked': (1, [
   
], 'wq.lock'),
    'wait_event_interruptible_exclusive_locked_irq': (1, [
   
], 'wq.lock'),
    'wait_event_interruptible_hrtimeout': (1, [
   
], ''),
    'wait_event_interruptible_lock_irq': (1, [
   
], 'lock'),
    'wait_event_interruptible_lock_irq_cmd': (1, [3], 'lock'),
    'wait_event_interruptible_lock_irq_timeout': (1, [
   
], 'lock'),
    'wait_event_interruptible_locked': (1, [
   
], 'wq.lock'),
    'wait_event_interruptible_locked_irq': (1, [
   
], 'wq.lock'),
    'wait_event_interruptible_timeout': (1, [
   
], ''),
    'wait_event_killable': (1, [
   
], ''),
    'wait_event_killable_exclusive': (1, [
   
], ''),
    'wait_event_killable_timeout': (1, [
   
], ''),
    'wait_event_lock_irq': (1, [
   
], 'lock'),
    'wait_event_lock_irq_cmd': (1, [3], 'lock'),
    'wait_event_lock_irq_timeout': (1, [
   
], 'lock'),
    'wait_event_state': (1, [
   
], ''),
    'wait_event_timeout': (1, [
   
], ''),
    'wait_var_event': (1, [
   
], ''),
    'wait_var_event_interruptible': (1, [
   
], ''),
    'wait_var_event_killable': (1, [
   
], ''),
    'wait_var_event_timeout': (1, [
   
], ''),
}
NS_SETTERS = [
    'set_current_state', '__set_current_state', 'set_special_state',
    'prepare_to_wait', 'prepare_to_wait_exclusive', 'prepare_to_wait_event',
]
NS_THREAD_EXIT = ('rwsem', 'warns')
NS_FIX_WAITERS = {
    'wait_event': ('TASK_UNINTERRUPTIBLE', None, False, False, False, 'void'),
    'wait_event_cmd': ('TASK_UNINTERRUPTIBLE', None, False, False, True, 'void'),
    'wait_event_freezable': ('TASK_INTERRUPTIBLE | TASK_FREEZABLE', 'signal_pending(current)', False, False, False, 'int'),
    'wait_event_freezable_timeout': ('TASK_INTERRUPTIBLE | TASK_FREEZABLE', 'signal_pending(current)', True, False, False, 'long'),
    'wait_event_idle': ('TASK_IDLE', None, False, False, False, 'void'),
    'wait_event_idle_exclusive': ('TASK_IDLE', None, False, True, False, 'void'),
    'wait_event_idle_exclusive_timeout': ('TASK_IDLE', None, True, True, False, 'long'),
    'wait_event_idle_timeout': ('TASK_IDLE', None, True, False, False, 'long'),
    'wait_event_interruptible': ('TASK_INTERRUPTIBLE', 'signal_pending(current)', False, False, False, 'int'),
    'wait_event_interruptible_timeout': ('TASK_INTERRUPTIBLE', 'signal_pending(current)', True, False, False, 'long'),
    'wait_event_killable': ('TASK_KILLABLE', 'fatal_signal_pending(current)', False, False, False, 'int'),
    'wait_event_killable_timeout': ('TASK_KILLABLE', 'fatal_signal_pending(current)', True, False, False, 'long'),
    'wait_event_state': (None, 'signal_pending_state', False, False, False, 'int'),
    'wait_event_timeout': ('TASK_UNINTERRUPTIBLE', None, True, False, False, 'long'),
}
# END GENERATED

NS_RAW = os.environ.get("NESTSLEEP_RAW", "") not in ("", "0")
# The driver's progress: each file's name, once, as its functions are
# listed (the last rules to run on a file), appended to this file.
NS_PROGRESS = os.environ.get("NESTSLEEP_PROGRESS_FILE", "")
ns_progress_seen = set()


def ns_progress(path):
    if NS_PROGRESS and path not in ns_progress_seen:
        ns_progress_seen.add(path)
        fd = os.open(NS_PROGRESS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (path + "\n").encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)

NS_KEEP = None
if os.environ.get("NESTSLEEP_POSITIONS"):
    with open(os.environ["NESTSLEEP_POSITIONS"]) as fp:
        NS_KEEP = set(l.strip() for l in fp if l.strip())
if os.environ.get("NESTSLEEP_WAITERS"):
    with open(os.environ["NESTSLEEP_WAITERS"]) as fp:
        for k, v in json.load(fp).items():
            NS_WAITERS[k] = (v["cond"], v["cmd"], v["locked"])
# Names of calls that may sleep inside a non-running window.  The driver
# computes them for the whole tree; alone, the rule uses its built-in list.
# Constraining the window rules by name keeps their path search cheap.
NS_WINDOW = None
if os.environ.get("NESTSLEEP_WINDOW"):
    with open(os.environ["NESTSLEEP_WINDOW"]) as fp:
        NS_WINDOW = set(json.load(fp))
NS_CARRIERS = set()
if os.environ.get("NESTSLEEP_CARRIERS"):
    with open(os.environ["NESTSLEEP_CARRIERS"]) as fp:
        NS_CARRIERS = set(json.load(fp))

coccinelle.ns_recs = []
coccinelle.ns_modes = []
coccinelle.ns_info = []

# ---------------------------------------------------------------------------
# Patch mode alone: which wait_event*() sites the copied rules of
# cocci/fix_wait_event.cocci rewrite (ns_pick(), once per file), and the
# functions those rules call.  A site is rewritten only when, from the file
# alone, its task cannot be woken through a stored task pointer: its
# function is no thread function and stores no task pointer, and the file
# calls no wake_up_process()/wake_up_state()/wake_q_add().  Wakers in
# other files are not seen.

NS_SITES = {}
NS_NAMES = {}
ns_wakers = []      # (file, line, waker)
ns_stores = {}      # (file, function) -> line
ns_recs_seen = [0]


def ns_key(p):
    return "%s:%s" % (p[0].line, p[0].column)


def ns_site(p):
    return ns_key(p) in NS_SITES


# Once a rule has rewritten a site, spatch 1.1.1 re-reads its function
# from a temporary file: the positions of the function's other waits no
# longer name the source file's lines.  There a site is known by its
# function and its call's text (the waiter, its queue and its condition,
# as the site rule binds them; blanks removed), which ns_pick() keeps only
# where no wait of the function that is left as it is reads the same.
NS_PATH = [None]
NS_BYTEXT = {}
# whether the rewrite's signal test needs #include <linux/sched/signal.h>
# (rules nssigh, nsinc), and the includes it can go beside
NS_SIGNAL_H = [False]
NS_SIGNAL_BESIDE = ("linux/sched.h", "linux/wait.h")


def ns_text(call):
    return re.sub(r"\s+", "", ",".join(s for s in map(str, call) if s.strip()))


def ns_spec(p, call):
    if p[0].file == NS_PATH[0]:
        return NS_SITES.get(ns_key(p))
    return NS_BYTEXT.get((p[0].current_element, ns_text(call)))


def ns_same(a, b):
    return re.sub(r"\s+", "", str(a)) == re.sub(r"\s+", "", b)


# p is a site of this form, and the queue, state, add_wait_queue*() and
# signal test that args made, and the wait entry that names made, are the
# site's own: rule instances of other sites leave it alone.  (spatch warns
# of an inherited metavariable that only a constraint reads, so no key of
# the site is inherited for this.)  call is the site's waiter, queue and
# condition (ns_spec()).
def ns_form(p, form, call, q, st, add, wait, test=None):
    s = ns_spec(p, call)
    return s is not None and s["form"] == form and ns_same(q, s["queue"]) and \
        ns_same(st, s["state"]) and ns_same(add, s.get("add", "add_wait_queue")) and \
        ns_same(wait, ns_names(p[0].current_element).get("wait", "wait")) and \
        (test is None or ns_same(test, s.get("test") or "0"))


def ns_names(fn):
    return NS_NAMES.get(str(fn), {})


def ns_decls(fn, k):
    names = ns_names(fn)
    return not names.get("nodecls") and len(names.get("decls") or []) == k


ns_first_done = set()


def ns_first(p, fn):
    return str(fn) in ns_first_done


def ns_call_args(text, i):
    # [(start, end)] of the arguments of the call whose '(' is at i, and
    # the index of its ')'; None when unbalanced
    depth, out, s, q = 0, [], i + 1, None
    j = i
    while j < len(text):
        c = text[j]
        if q:
            if c == "\\":
                j += 1
            elif c == q:
                q = None
        elif c in "\"'":
            q = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                out.append((s, j))
                return out, j
        elif c == "," and depth == 1:
            out.append((s, j))
            s = j + 1
        j += 1
    return None


def ns_read_call(r, text, lines):
    # the site's offset, its '(' and ')' and its arguments
    w = r["site"]
    off = sum(len(l) for l in lines[:r["line"] - 1]) + r["col"]
    if not text.startswith(w, off):
        raise ValueError("the source at the site is not %s()" % w)
    po = text.find("(", off + len(w))
    got = ns_call_args(text, po) if po >= 0 else None
    if got is None:
        raise ValueError("cannot read the arguments of %s()" % w)
    return off, po, [text[a:b].strip() for a, b in got[0]], got[1]


def ns_pick_one(r, text, lines, idents):
    # the site's spec, or raise ValueError(reason)
    w = r["site"]
    if r["shape"] != "wait_event":
        raise ValueError("only wait_event*() sites are rewritten alone; nestsleep's driver rewrites "
                         "%s loops" % ("set_current_state()" if r["shape"] != "prepare_to_wait" else "prepare_to_wait()"))
    if r.get("locked"):
        raise ValueError("the condition runs under a spinlock: a sleep in atomic context, which "
                         "wait_woken() does not fix")
    if w not in NS_FIX_WAITERS:
        raise ValueError("%s() has no wait_woken() rewrite" % w)
    st, sig, timeout, excl, cmd, value = NS_FIX_WAITERS[w]
    off, po, args, pc = ns_read_call(r, text, lines)
    cond = args[NS_WAITERS[w][0]] if NS_WAITERS[w][0] < len(args) else ""
    if "({" in cond or re.search(r"[^=!<>+\-*/%&|^]=[^=]", cond):
        raise ValueError("the condition assigns or is a statement expression; nestsleep's driver "
                         "rewrites it")
    if "/*" in text[po:pc] or "//" in text[po:pc] or "#" in text[po:pc]:
        raise ValueError("a comment or directive inside the macro arguments")
    if cmd and len(args) != 4:
        raise ValueError("%s() does not have 4 arguments" % w)
    if st is None:
        if len(args) < 3:
            raise ValueError("%s() has no state argument" % w)
        st = args[2]
        sig = "signal_pending_state(%s, current)" % st
    ls = text.rfind("\n", 0, off) + 1
    before = re.sub(r"\s+", "", text[ls:off])
    after = re.sub(r"\s+", "", text[pc + 1:pc + 40])
    le = text.find("\n", pc)
    use = None
    if before == "" and after.startswith(";"):
        use = "discard"
    elif before == "return" and after.startswith(";"):
        use = "return"
    elif re.match(r"^[A-Za-z_][\w.>\-\[\]]*=$", before) and before[-2:-1] not in "=!<>+-*/%&|^" \
            and after.startswith(";"):
        use = "assign"
    elif before in ("if(", "if(!") and after.startswith(")"):
        use = "if"
    elif before == "if(" and after.startswith("<0)") and sig:
        use = "if"
    if use is None:
        raise ValueError("the value of %s() is used inside an expression or an unusual statement" % w)
    rest = text[text.find(";" if use != "if" else ")", pc + 1) + 1:le if le >= 0 else len(text)]
    if use != "if" and rest.strip():
        raise ValueError("the wait shares its line with other code")
    fo = text.rfind("\n{", 0, off)
    head = text[max(text.rfind("\n}", 0, fo), text.rfind(";", 0, fo), 0):fo] if fo >= 0 else ""
    if re.search(r"\bpoll_table\s*\*", head):
        raise ValueError("the wait is inside a ->poll() method, which must not block at all")
    need = use != "discard" and value != "void"
    form = "cmd" if cmd else ("signal_" if sig else "") + ("timeout" if timeout else "")
    form = form.rstrip("_") or ("signal" if sig else "plain")
    q = args[0]
    m = re.match(r"^\*\s*([A-Za-z_]\w*(?:(?:->|\.)[A-Za-z_]\w*)*)$", q)
    if m:
        q = m.group(1)
    elif re.match(r"^[A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*|\[[^\]]*\])*$", q):
        q = "&" + re.sub(r"\s+", "", q)
    else:
        q = "&(%s)" % q
    return {"form": form, "queue": q, "state": st, "test": sig,
            "add": "add_wait_queue_exclusive" if excl else "add_wait_queue",
            "need": need and form == "signal" or form in ("timeout", "signal_timeout"),
            "text": ns_text([w] + args[:2])}


def ns_pick_name(taken, choices):
    for c in choices:
        if c not in taken:
            return c
    k = 2
    while "%s%d" % (choices[0], k) in taken:
        k += 1
    return "%s%d" % (choices[0], k)


def ns_pick():
    # once per file, after the matching rules: choose the sites of this
    # file that the copied fix_wait_event.cocci rules rewrite
    # (coccicheck runs one spatch over many files: nothing carries over)
    NS_SITES.clear()
    NS_NAMES.clear()
    NS_BYTEXT.clear()
    NS_PATH[0] = None
    NS_SIGNAL_H[0] = False
    ns_first_done.clear()
    new = coccinelle.ns_recs[ns_recs_seen[0]:]
    ns_recs_seen[0] = len(coccinelle.ns_recs)
    sites = {}
    for r in new:
        if r["shape"] in ("before_schedule", "later", "function"):
            continue
        k = (r["file"], r["line"], r["col"], r["colend"])
        if k not in sites or (r["cline"], r["ccol"]) < (sites[k]["cline"], sites[k]["ccol"]):
            sites[k] = r
    if not sites:
        return
    path = next(iter(sites))[0]
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as fp:
            text = fp.read()
    except OSError as e:
        text = ""
    lines = text.splitlines(True)
    idents = set(re.findall(r"[A-Za-z_]\w*", text))
    wk = sorted((l, w) for (f, l, w) in ns_wakers if f == path)
    NS_PATH[0] = path
    incs = set(re.findall(r"(?m)^#\s*include\s*<([^>]+)>", text))
    # signal_pending() and friends are declared in <linux/sched/signal.h>;
    # a file that includes it, or calls them already, sees them
    sig_seen = "linux/sched/signal.h" in incs or \
        re.search(r"\b(?:fatal_)?signal_pending(?:_state)?\s*\(", text) is not None
    ok = []         # (site, function, spec) of the sites that pass
    left = {}       # function -> the call texts of its other sites
    for k in sorted(sites):
        r = sites[k]
        fn = r["func"]
        try:
            spec = ns_pick_one(r, text, lines, idents)
            if fn in ns_threads_here:
                raise ValueError("%s() is a thread function: a wake_up_process() of its task, "
                                 "kthread_stop() or others, would be lost" % fn)
            if (path, fn) in ns_stores:
                raise ValueError("%s() stores a task pointer (line %d): a wake_up_process() through it "
                                 "would be lost" % (fn, ns_stores[(path, fn)]))
            if wk:
                raise ValueError("the file wakes tasks directly (%s() on line %d)" % (wk[0][1], wk[0][0]))
            if spec["test"] and not sig_seen and not incs & set(NS_SIGNAL_BESIDE):
                raise ValueError("its signal test needs <linux/sched/signal.h>, and the file has no "
                                 "#include <%s> to add it beside" % "> or <".join(NS_SIGNAL_BESIDE))
            ok.append((k, fn, spec))
        except ValueError as e:
            coccinelle.ns_info.append("%s:%s:%s-%s: INFO: nested sleep not rewritten: %s" % (
                k[0], k[1], k[2], k[3], e))
            try:
                tx = ns_text([r["site"]] + ns_read_call(r, text, lines)[2][:2])
            except ValueError:
                tx = None
            left.setdefault(fn, set()).add(tx)
    # After the first rewrite in a function, its other sites are found by
    # their text (ns_spec()), which must then name no site left as it is.
    # Sites of the same text are rewritten alike.
    many = set(fn for _, fn, _ in ok if sum(1 for _, f, _ in ok if f == fn) > 1)
    chosen = {}     # function -> [(site, spec)]
    for k, fn, spec in ok:
        if fn in many and fn in chosen and (None in left.get(fn, ()) or spec["text"] in left.get(fn, ()) or
                                            any(s["text"] in left.get(fn, ()) for _, s in chosen[fn])):
            coccinelle.ns_info.append("%s:%s:%s-%s: INFO: nested sleep not rewritten: another wait of "
                                      "%s() is rewritten in this run, and one that reads the same is left "
                                      "as it is; run MODE=patch again on the result" % (
                                          k[0], k[1], k[2], k[3], fn))
            continue
        chosen.setdefault(fn, []).append((k, spec))
        if spec["test"] and not sig_seen:
            NS_SIGNAL_H[0] = True
        spec["where"] = "%s:%s:%s-%s" % k
        NS_SITES["%d:%d" % (k[1], k[2])] = spec
    if not chosen:
        return
    wait = ns_pick_name(idents, ["wait", "wait_entry", "woken_wait"])
    ret = ns_pick_name(idents, ["ret", "err", "wait_ret"])
    tmo = ns_pick_name(idents, ["timeout", "remaining", "tmo"])
    for fn, specs in chosen.items():
        if len(specs) > 1:
            for _, s in specs:
                NS_BYTEXT[(fn, s["text"])] = s
        names = {"wait": wait, "decls": []}
        if any(s["form"] == "signal" and s["need"] for _, s in specs):
            names["ret"] = ret
            names["decls"].append(["int", ret])
        if any(s["form"] in ("timeout", "signal_timeout") for _, s in specs):
            names["tmo"] = tmo
            names["decls"].append(["long", tmo])
        NS_NAMES[fn] = names

def ns_is_waiter(w):
    return w in NS_WAITERS

# Alone (no knowledge injected by the driver), the rule follows one level
# of calls, as locks/call_kern.cocci does: a function defined in the file
# being read that calls a known primitive is taken to sleep (rule nshelp).
NS_ALONE = not NS_RAW and NS_KEEP is None and NS_WINDOW is None
# (file, helper) -> [(line, col, primitive, group, effect)]
ns_helpers = {}
ns_helper_names = set()

def ns_window(f):
    if NS_WINDOW is not None:
        return f in NS_WINDOW
    return f in NS_SLEEPERS or f in NS_GFP_ARG or f in ns_helper_names

def ns_alone_prim(f):
    return NS_ALONE and (f in NS_SLEEPERS or f in NS_GFP_ARG) and \
        f not in NS_RESTORE and f not in NS_SETTERS and f not in NS_NOT_SLEEPING

def ns_helper(shape, p0, f, p):
    # (chain, group, effect) when f is a sleeping helper of p's file
    if not NS_ALONE or f == p0.current_element:
        return None
    hs = sorted(ns_helpers.get((p.file, f), []))
    if shape != "wait_event":
        # a window's own sleep: a helper that only schedules is the
        # sleep the window was opened for
        hs = [h for h in hs if h[3] != "schedule"]
    if not hs:
        return None
    return ("%s -> %s" % (f, hs[0][2]), hs[0][3], hs[0][4])

def ns_is_carrier(g):
    return g in NS_CARRIERS

# calls that return with the task running whenever they return true
# (io_run_task_work()): the driver finds them; a path through one is not
# followed (the true side leaves the window, the false side is given up)
def ns_runs_on_true(f):
    return False

# thread functions: the driver's whole-tree set, or those the thr rule
# saw passed to a thread creator in the file being read
ns_threads_here = set()

def ns_is_thread(t):
    return t in ns_threads_here

def ns_args(s):
    out, cur, depth = [], "", 0
    for c in s:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out

def ns_gfp_blocks(g):
    toks = set(g.replace("|", " ").replace("(", " ").replace(")", " ").split())
    return any(t in toks for t in NS_BLOCKING_GFP)

def ns_builtin(f, al):
    # (group, effect) when f is a known sleeping primitive, else None
    if f in NS_SLEEPERS:
        return NS_SLEEPERS[f]
    if f in NS_GFP_ARG:
        a = ns_args(al)
        i = NS_GFP_ARG[f]
        if i < len(a) and ns_gfp_blocks(a[i]):
            return ("gfp_alloc", "warns")
    return None

def ns_pos(p):
    return "%s:%s:%s" % (p.file, p.line, p.column)

def ns_record(shape, site, p0, f, p, al, kind, base, extra):
    """Keep or drop one candidate call; True if it stays in the match."""
    if f in NS_RESTORE or f in NS_SETTERS or f in NS_NOT_SLEEPING:
        return False
    rec = {"shape": shape, "site": site, "file": p0.file,
           "line": int(p0.line), "col": int(p0.column),
           "colend": int(p0.column_end), "func": p0.current_element,
           "call": f, "kind": kind, "base": base,
           "cline": int(p.line), "ccol": int(p.column), "args": al}
    rec.update(extra)
    if NS_RAW:
        coccinelle.ns_recs.append(rec)
        return False
    if NS_KEEP is not None:
        keep = ns_pos(p) in NS_KEEP
    else:
        b = None if kind != "call" else ns_builtin(f, al)
        if shape == "thread_exit":
            b = NS_THREAD_EXIT
        if b is None and kind == "call":
            h = ns_helper(shape, p0, f, p)
            if h is not None:
                rec["chain"] = h[0]
                b = h[1:]
        keep = b is not None
        if keep:
            rec["group"], rec["effect"] = b
    if keep and NS_KEEP is None:
        coccinelle.ns_recs.append(rec)
    return keep

// ---------------------------------------------------------------------------
// Alone: the functions of this file that call a known primitive (one
// level, as locks/call_kern.cocci).  A call to one of them is taken to
// sleep.  The driver gives the whole tree's chains instead.

@nshelp@
identifier f : script:python() { ns_alone_prim(f) };
expression list al;
position p;
@@

f@p(al)

@script:python@
f << nshelp.f;
al << nshelp.al;
p << nshelp.p;
@@
fn = p[0].current_element
b = ns_builtin(f, str(al))
if b is not None:
    h = ns_helpers.setdefault((p[0].file, fn), [])
    e = (int(p[0].line), int(p[0].column), f, b[0], b[1])
    if e not in h:
        h.append(e)
    ns_helper_names.add(fn)

// ---------------------------------------------------------------------------
// Sites the kernel annotated as checked: sched_annotate_sleep() in the
// condition itself.

@annot@
identifier w : script:python() { ns_is_waiter(w) };
expression list es;
position p0;
@@

w@p0(es, <+... sched_annotate_sleep() ...+>, ...)

// ---------------------------------------------------------------------------
// Shape 1: wait_event*() (and wrappers): calls in the condition, or in the
// cmd that runs before schedule().

@wc@
identifier w : script:python() { ns_is_waiter(w) };
identifier f;
expression list[n] es;
expression list al;
expression E;
position p0 != annot.p0;
position p;
@@

w@p0(es, <+... \( f@p(al) \| E->f@p(...) \| E.f@p(...) \) ...+>, ...)

@script:python@
w << wc.w;
f << wc.f;
n << wc.n;
p0 << wc.p0;
p << wc.p;
al << wc.al = "";
E << wc.E = "";
@@
role = None
cond, cmds, locked = NS_WAITERS[w]
if int(n) == cond:
    role = "cond"
elif int(n) in cmds:
    role = "cmd"
if role is None or not ns_record("wait_event", w, p0[0], f, p[0], str(al),
                                  "call" if not E else "member", str(E),
                                  {"role": role, "locked": locked if role == "cond" else "",
                                   "argn": int(n)}):
    cocci.include_match(False)

// ---------------------------------------------------------------------------
// Shape 2: prepare_to_wait*() ... schedule(): calls in between.

@pw exists@
identifier ptw = {prepare_to_wait, prepare_to_wait_exclusive, prepare_to_wait_event}; // generated: state_setters.prepare
identifier r =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|finish_swait|finish_wait|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore
identifier f : script:python() { ns_window(f) };
expression list al;
expression E;
position p0, p;
identifier rt : script:python() { ns_runs_on_true(rt) };
@@

ptw@p0(...)
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
\( f@p(al) \| E->f@p(...) \| E.f@p(...) \)

@script:python@
ptw << pw.ptw;
f << pw.f;
p0 << pw.p0;
p << pw.p;
al << pw.al = "";
E << pw.E = "";
@@
if not ns_record("prepare_to_wait", ptw, p0[0], f, p[0], str(al),
                 "call" if not E else "member", str(E), {}):
    cocci.include_match(False)

// ---------------------------------------------------------------------------
// Shape 3: set_current_state(TASK_*) ... schedule(): calls in between.

@sc exists@
identifier scs = {set_current_state, __set_current_state, set_special_state}; // generated: state_setters.set
identifier r =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|finish_swait|finish_wait|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore
expression S;
identifier f : script:python() { ns_window(f) };
expression list al;
expression E;
position p0, p;
identifier rt : script:python() { ns_runs_on_true(rt) };
@@

scs@p0(S)
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
\( f@p(al) \| E->f@p(...) \| E.f@p(...) \)

@script:python@
scs << sc.scs;
S << sc.S;
f << sc.f;
p0 << sc.p0;
p << sc.p;
al << sc.al = "";
E << sc.E = "";
@@
if str(S).strip() == "TASK_RUNNING" or not ns_record(
        "set_current_state", scs, p0[0], f, p[0], str(al),
        "call" if not E else "member", str(E), {"state": str(S)}):
    cocci.include_match(False)

// A call the set_current_state() window reaches after its loop has ended:
// no schedule() follows it before TASK_RUNNING is restored (hpet_read()'s
// put_user() after 'break').  Alone, the rule names this shape in its
// message; the driver finds the loop itself (cfacts.loop_around()).

@scsched depends on (report || org) exists@
identifier sc.scs, sc.f;
expression sc.S;
position sc.p0, sc.p;
position q;
expression E;
identifier r =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|finish_swait|finish_wait|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore
@@

scs@p0(S)
... when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
\( f@p@q(...) \| E->f@p@q(...) \| E.f@p@q(...) \)
... when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
r(...)

@script:python@
q << scsched.q;
@@
coccinelle.ns_recs.append({"shape": "before_schedule", "file": q[0].file,
                           "cline": int(q[0].line), "ccol": int(q[0].column)})

// ---------------------------------------------------------------------------
// The window's own sleep.  A call in a prepare_to_wait*() or
// set_current_state() window that reaches schedule() through a helper is
// the sleep the window was opened for, unless another sleep can follow it
// before the window ends.  This rule marks the calls that such a later
// sleep follows; the driver keeps a schedule() chain only for those.

@later depends on !context && !org && !report exists@
identifier f : script:python() { ns_window(f) };
identifier s =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore.sleeps
identifier n =~ "^(finish_swait|finish_wait)$"; // generated: state_restore.without_sleep
identifier st = {set_current_state, __set_current_state, set_special_state}; // generated: state_setters.set
identifier sp = {prepare_to_wait, prepare_to_wait_exclusive, prepare_to_wait_event}; // generated: state_setters.prepare
expression E;
position p;
@@

\( f@p(...) \| E->f@p(...) \| E.f@p(...) \)
... when != n(...)
    when != st(...)
    when != sp(...)
s(...)

@script:python@
p << later.p;
@@
if NS_RAW:
    coccinelle.ns_recs.append({"shape": "later", "file": p[0].file,
                               "cline": int(p[0].line), "ccol": int(p[0].column)})

// ---------------------------------------------------------------------------
// Shape 4: a helper that may return with the task still non-running (a
// "carrier", found by the driver), then a call that may sleep before the
// state is restored, possibly in the next iteration of a loop.

@carry exists@
identifier g : script:python() { ns_is_carrier(g) };
identifier r =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|finish_swait|finish_wait|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore
identifier f : script:python() { ns_window(f) };
expression list al;
expression E;
position p0, p;
identifier rt : script:python() { ns_runs_on_true(rt) };
@@

g@p0(...)
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
\( f@p(al) \| E->f@p(...) \| E.f@p(...) \)

@script:python@
g << carry.g;
f << carry.f;
p0 << carry.p0;
p << carry.p;
al << carry.al = "";
E << carry.E = "";
@@
if f == g or not ns_record("carried_state", g, p0[0], f, p[0], str(al),
                           "call" if not E else "member", str(E), {}):
    cocci.include_match(False)

// ---------------------------------------------------------------------------
// Shape 5: a thread function (the first argument of kthread_run() and
// friends) that returns with the task state still set.  kthread() then
// calls kthread_exit(), and the exit path sleeps (sleep_info.json
// thread_exit): w1_process() before 36225a7c72e9.  A path through a call
// that may sleep is left out: that call resets the state (and is itself a
// finding).  Alone, the rule knows the thread functions of the file it
// reads; the driver gives those of the whole tree.
//
// The rule follows the state along each path from the setter to the
// return: a path that restores TASK_RUNNING or runs schedule() (which
// returns in TASK_RUNNING: __schedule() resets the state for a pending
// signal, kernel/sched/core.c:6515-6516, or dequeues the task,
// :6537, which runs again only after try_to_wake_up() set TASK_RUNNING,
// :3659 and :4112) is left out.  Coccinelle's control flow graph gives
// every loop an edge out through its test, also for(;;), while(1) and
// while(true), which only a break, goto or return can leave.  So no path
// crosses the head of such a loop, except the one the last alternatives
// match: the state reaches the head of the loop still set, and the body
// leaves it by a break or goto, or returns, before it restores the state.
// vhost_worker() in 6.1 (drivers/vhost/vhost.c:344-369) is not reported:
// its only break follows __set_current_state(TASK_RUNNING).  Two tests of
// one condition (aoe's kthread(): the state set under 'if (!more)', then
// 'if (!more) schedule(); else ...') are the driver's (sameguard.py).

@thr@
identifier kc = {kthread_run, kthread_run_on_cpu, kthread_create, kthread_create_on_node, kthread_create_on_cpu}; // generated: tasks.creators
identifier t;
@@

kc(\(t\|&t\), ...)

@script:python@
t << thr.t;
@@
ns_threads_here.add(t)

@texit exists@
identifier t : script:python() { ns_is_thread(t) };
identifier scs = {set_current_state, __set_current_state, set_special_state}; // generated: state_setters.set
identifier r =~ "^(__schedule|blk_io_schedule|do_wait_intr|do_wait_intr_irq|finish_swait|finish_wait|freezable_schedule|freezable_schedule_timeout|freezable_schedule_unsafe|io_schedule|io_schedule_timeout|memalloc_retry_wait|preempt_schedule_common|schedule|schedule_hrtimeout|schedule_hrtimeout_range|schedule_hrtimeout_range_clock|schedule_idle|schedule_preempt_disabled|schedule_rtlock|schedule_timeout|schedule_timeout_idle|schedule_timeout_interruptible|schedule_timeout_killable|schedule_timeout_uninterruptible|wait_woken)$"; // generated: state_restore
identifier f : script:python() { ns_window(f) };
expression S;
identifier l;
statement S2;
symbol true;
position p0, p;
identifier rt : script:python() { ns_runs_on_true(rt) };
@@

t(...) {
<+...
scs@p0(S)
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
(
return@p ...;
|
for(;;) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
...
}
|
for(;;) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
\(break;\|goto l;\)
...
}
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
|
while(1) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
...
}
|
while(1) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
\(break;\|goto l;\)
...
}
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
|
while(true) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
...
}
|
while(true) {
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
\(break;\|goto l;\)
...
}
... when != r(...)
    when != __set_current_state(TASK_RUNNING)
    when != set_current_state(TASK_RUNNING)
    when != sched_annotate_sleep()
    when != rt(...)
    when != f(...)
    when != for(;;) S2
    when != while(1) S2
    when != while(true) S2
return@p ...;
)
...+>
}

@script:python@
t << texit.t;
scs << texit.scs;
S << texit.S;
p0 << texit.p0;
p << texit.p;
@@
if str(S).strip() == "TASK_RUNNING" or not ns_record(
        "thread_exit", scs, p0[0], "kthread_exit", p[0], "", "call", "",
        {"state": str(S), "thread": t}):
    cocci.include_match(False)

// ---------------------------------------------------------------------------
// Context mode: mark the calls that may sleep.

@depends on context && !org && !report@
position any_p = {wc.p, pw.p, sc.p, carry.p};
identifier f;
expression E;
@@

(
* f@any_p(...)
|
* E->f@any_p(...)
|
* E.f@any_p(...)
)

@depends on context && !org && !report@
position texit.p;
@@

* return@p ...;

// ---------------------------------------------------------------------------
// Function inventory, for the driver's parse-coverage figures only.

@fninv depends on !context && !org && !report@
identifier fn;
position p;
@@

fn@p(...) { ... }

@script:python@
fn << fninv.fn;
p << fninv.p;
@@
if NS_RAW:
    coccinelle.ns_recs.append({"shape": "function", "file": p[0].file,
                               "func": fn, "line": int(p[0].line)})
    ns_progress(p[0].file)

// ---------------------------------------------------------------------------
// Patch mode alone: the direct wakers of the file and the functions that
// store a task pointer (ns_pick() refuses their sites), then the rewrite
// rules of cocci/fix_wait_event.cocci.  The driver runs fix_wait_event.cocci
// itself, with the whole tree's wakers (scripts/nestsleep/fix/).

@nswake depends on patch@
identifier wk = {wake_up_process, wake_up_state, wake_q_add, wake_q_add_safe};
position p;
@@

wk@p(...)

@script:python@
wk << nswake.wk;
p << nswake.p;
@@
ns_wakers.append((p[0].file, int(p[0].line), wk))

@nsstore depends on patch@
identifier fn;
symbol current;
expression E;
struct task_struct *T;
position p;
@@

fn(...) { <+... \( E@p = current \| E@p = get_current() \| E@p = T \| get_task_struct@p(...) \) ...+> }

@script:python@
fn << nsstore.fn;
p << nsstore.p;
@@
k = (p[0].file, fn)
ns_stores[k] = min(ns_stores.get(k, 1 << 30), int(p[0].line))

@nsdeclstore depends on patch@
identifier fn, x;
symbol current;
type T;
position p;
@@

fn(...) { <+... T x@p = \(current\|get_current()\); ...+> }

@script:python@
fn << nsdeclstore.fn;
p << nsdeclstore.p;
@@
k = (p[0].file, fn)
ns_stores[k] = min(ns_stores.get(k, 1 << 30), int(p[0].line))

@script:python depends on patch@
@@
ns_pick()

// BEGIN COPY of the rules after '// BEGIN SHARED' in cocci/fix_wait_event.cocci, by python3 -m nestsleep gen-builtin; do not edit

// The sites and their function.

@site depends on patch@
identifier fn, we;
expression E, cond;
position p : script:python() { ns_site(p) };
@@

fn(...) { <+... we@p(E, cond, ...) ...+> }

// The names, chosen by the driver.  One set per function.

@script:python names@
fn << site.fn;
wait;
ret;
tmo;
@@

names = ns_names(fn)
coccinelle.wait = cocci.make_ident(names.get("wait", "wait"))
coccinelle.ret = cocci.make_ident(names.get("ret", "ret"))
coccinelle.tmo = cocci.make_ident(names.get("tmo", "timeout"))

// The queue, state and signal test of each site.

@script:python args@
p << site.p;
add;
q;
st;
test;
@@

s = NS_SITES[ns_key(p)]
coccinelle.add = cocci.make_ident(s.get("add", "add_wait_queue"))
coccinelle.q = cocci.make_expr(s["queue"])
coccinelle.st = cocci.make_expr(s["state"])
coccinelle.test = cocci.make_expr(s.get("test") or "0")

// No signal, no timeout, no value: wait_event(), wait_event_idle(), a
// discarded wait_event_freezable().

@depends on patch@
expression site.E, site.cond;
identifier site.we;
identifier names.wait;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "plain", [we, E, cond], q, st, add, wait) };
@@

- we@p(E, cond);
+ add(q, &wait);
+ while (!cond)
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ remove_wait_queue(q, &wait);

// wait_event_cmd(): cmd1 before each sleep, cmd2 after it.

@depends on patch@
expression site.E, site.cond;
expression cmd1, cmd2;
identifier site.we;
identifier names.wait;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "cmd", [we, E, cond], q, st, add, wait) };
@@

- we@p(E, cond, cmd1, cmd2);
+ add(q, &wait);
+ while (!cond) {
+ 	cmd1;
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ 	cmd2;
+ }
+ remove_wait_queue(q, &wait);

// A signal ends the wait with -ERESTARTSYS: the _interruptible,
// _killable, _freezable and _state waits.

@depends on patch@
expression site.E, site.cond;
expression lv;
expression list[n] rest;
identifier site.we;
statement S1, S2;
identifier names.wait, names.ret;
expression args.q, args.st, args.test;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait, test) {
	ns_form(p, "signal", [we, E, cond], q, st, add, wait, test) };
@@

(
- we@p(E, cond, rest);
+ add(q, &wait);
+ while (!cond) {
+ 	if (test)
+ 		break;
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
|
- ret = we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
+ lv = ret;
|
- return we@p(E, cond, rest);
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
+ return ret;
|
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, rest)
+ ret
|
  !
- we@p(E, cond, rest)
+ ret
|
- we@p(E, cond, rest)
+ ret
  < 0
)
  ) S1 else S2
|
+ ret = 0;
+ add(q, &wait);
+ while (!cond) {
+ 	if (test) {
+ 		ret = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	wait_woken(&wait, st, MAX_SCHEDULE_TIMEOUT);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, rest)
+ ret
|
  !
- we@p(E, cond, rest)
+ ret
|
- we@p(E, cond, rest)
+ ret
  < 0
)
  ) S1
)

// A timeout, no signal: the _timeout and _idle_timeout waits.  The
// remaining jiffies go through wait_woken(), as ___wait_event() passes
// them through schedule_timeout().

@depends on patch@
expression site.E, site.cond;
expression to, lv;
identifier site.we;
statement S1, S2;
identifier names.wait, names.tmo;
expression args.q, args.st;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait) {
	ns_form(p, "timeout", [we, E, cond], q, st, add, wait) };
@@

(
- we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (!cond) {
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- tmo = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ lv = tmo;
|
- return we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ return tmo;
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
)
  ) S1 else S2
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
)
  ) S1
)

// A timeout and a signal: the _interruptible_timeout, _killable_timeout
// and _freezable_timeout waits.

@depends on patch@
expression site.E, site.cond;
expression to, lv;
identifier site.we;
statement S1, S2;
identifier names.wait, names.tmo;
expression args.q, args.st, args.test;
identifier args.add;
position p : script:python(we, E, cond, q, st, add, wait, test) {
	ns_form(p, "signal_timeout", [we, E, cond], q, st, add, wait, test) };
@@

(
- we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (!cond) {
+ 	if (!tmo)
+ 		break;
+ 	if (test)
+ 		break;
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- tmo = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
|
- lv = we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ lv = tmo;
|
- return we@p(E, cond, to);
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
+ return tmo;
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
|
- we@p(E, cond, to)
+ tmo
  < 0
)
  ) S1 else S2
|
+ tmo = to;
+ add(q, &wait);
+ while (1) {
+ 	if (cond) {
+ 		if (!tmo)
+ 			tmo = 1;
+ 		break;
+ 	}
+ 	if (!tmo)
+ 		break;
+ 	if (test) {
+ 		tmo = -ERESTARTSYS;
+ 		break;
+ 	}
+ 	tmo = wait_woken(&wait, st, tmo);
+ }
+ remove_wait_queue(q, &wait);
  if (
(
- we@p(E, cond, to)
+ tmo
|
  !
- we@p(E, cond, to)
+ tmo
|
- we@p(E, cond, to)
+ tmo
  < 0
)
  ) S1
)

// Braces on both arms (coding-style.rst: when one arm of an if needs
// braces, both get them).  spatch braces the arm that held the wait; the
// other arm of that if gets them here, unless it is an else if.  The
// driver asks for it (-D balance) only when the wait was an unbraced arm:
// an if that was unbalanced before is not restyled.

@depends on patch && balance disable braces0, braces1, braces2, braces3, braces4@
identifier site.fn;
identifier names.wait;
expression args.q;
expression C;
statement S1;
@@

fn(...) {
<...
(
  if (C) { ... } else { ... }
|
  if (C)
- S1
- else
+ {
+ S1
+ } else
  {
  ...
  remove_wait_queue(q, &wait);
  ...
  }
)
...>
}

@depends on patch && balance disable braces0, braces1, braces2, braces3, braces4@
identifier site.fn;
identifier names.wait;
expression args.q;
expression C, C2;
statement S2, S3, S4;
@@

fn(...) {
<...
(
  if (C) { ... } else { ... }
|
  if (C) { ... } else if (C2) S3 else S4
|
  if (C) { ... } else if (C2) S3
|
  if (C) {
  ...
  remove_wait_queue(q, &wait);
  ...
  } else
- S2
+ {
+ S2
+ }
)
...>
}

// The functions the rules above rewrote: a site whose statement context
// no rule matched gets no declarations either.  The rules below run only
// where rw bound E (decl inherits it), on the site's function.

@rw depends on patch@
identifier site.fn, names.wait;
expression E;
@@

fn(...) { <+... remove_wait_queue(E, &wait); ...+> }

// The declarations, at the top of the function: the wait entry, and the
// variable that carries the wait's value when one is needed.  A blank
// line follows them when the function's first line is not a declaration.

@script:python decl@
fn << site.fn;
E << rw.E;
wait;
t1;
v1;
t2;
v2;
@@

names = ns_names(fn)
ds = (names.get("decls") or []) + [["int", "unused"]] * 2
coccinelle.wait = cocci.make_ident(names.get("wait", "wait"))
coccinelle.t1 = cocci.make_type(ds[0][0])
coccinelle.v1 = cocci.make_ident(ds[0][1])
coccinelle.t2 = cocci.make_type(ds[1][0])
coccinelle.v2 = cocci.make_ident(ds[1][1])

@first0 depends on patch@
identifier site.fn, decl.wait;
statement S;
position pd : script:python(fn) { ns_decls(fn, 0) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+
  S
  ...
}

@script:python@
pd << first0.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait;
position pd : script:python(fn) { ns_decls(fn, 0) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
  ...
}

@first1 depends on patch@
identifier site.fn, decl.wait, decl.v1;
type decl.t1;
statement S;
position pd : script:python(fn) { ns_decls(fn, 1) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+ t1 v1;
+
  S
  ...
}

@script:python@
pd << first1.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait, decl.v1;
type decl.t1;
position pd : script:python(fn) { ns_decls(fn, 1) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
++ t1 v1;
  ...
}

@first2 depends on patch@
identifier site.fn, decl.wait, decl.v1, decl.v2;
type decl.t1, decl.t2;
statement S;
position pd : script:python(fn) { ns_decls(fn, 2) };
@@

fn@pd(...) {
+ DEFINE_WAIT_FUNC(wait, woken_wake_function);
+ t1 v1;
+ t2 v2;
+
  S
  ...
}

@script:python@
pd << first2.pd;
@@

ns_first_done.add(pd[0].current_element)

@depends on patch@
identifier site.fn, decl.wait, decl.v1, decl.v2;
type decl.t1, decl.t2;
position pd : script:python(fn) { ns_decls(fn, 2) and not ns_first(pd, fn) };
@@

fn@pd(...) {
++ DEFINE_WAIT_FUNC(wait, woken_wake_function);
++ t1 v1;
++ t2 v2;
  ...
}

// END COPY

// A chosen site that is still there: no rewrite rule matched its
// statement.  It is listed, not left out in silence.

@nsleft depends on patch@
identifier we;
expression E, cond;
position p : script:python(we, E, cond) { ns_spec(p, [we, E, cond]) is not None };
@@

we@p(E, cond, ...)

@script:python@
we << nsleft.we;
E << nsleft.E;
cond << nsleft.cond;
p << nsleft.p;
@@
coccinelle.ns_info.append("%s: INFO: nested sleep not rewritten: no rewrite rule matched the statement "
                          "around %s()" % (ns_spec(p, [we, E, cond])["where"], we))

// The rewrite's signal test, signal_pending(current) and the like, is
// declared in <linux/sched/signal.h>: added beside <linux/sched.h> or
// before <linux/wait.h> when the file neither includes it nor calls such
// a test already (ns_pick() refuses the sites of a file that has
// neither).  spatch 1.1.1 adds a line beside an #include only when the
// rule names that header.

@nssigh depends on patch@
identifier fn : script:python() { NS_SIGNAL_H[0] };
@@

fn(...) { ... }

@nsinc depends on patch && nssigh@
@@

 #include <linux/sched.h>
+#include <linux/sched/signal.h>

@depends on patch && nssigh && !nsinc@
@@

+#include <linux/sched/signal.h>
 #include <linux/wait.h>

// ---------------------------------------------------------------------------
// Output: one line per wait site, its sleep paths grouped.

@script:python depends on report@
@@
coccinelle.ns_modes.append("report")

@script:python depends on org@
@@
coccinelle.ns_modes.append("org")

@finalize:python@
recs << merge.ns_recs;
modes << merge.ns_modes;
infos << merge.ns_info;
@@
import json as ns_json
ns_all = [r for part in recs for r in part]
ns_mode = set(m for part in modes for m in part)
for line in sorted(set(l for part in infos for l in part)):
    print(line)
if NS_RAW:
    for r in ns_all:
        print("NESTSLEEP " + ns_json.dumps(r, sort_keys=True))
elif ns_mode:
    ns_sites = {}
    ns_sched = set((r["file"], r["cline"], r["ccol"]) for r in ns_all if r["shape"] == "before_schedule")
    ns_all = [r for r in ns_all if r["shape"] != "before_schedule"]
    for r in ns_all:
        ns_sites.setdefault((r["file"], r["line"], r["col"], r["colend"]), []).append(r)
    for key in sorted(ns_sites):
        rs = sorted(ns_sites[key], key=lambda r: (r["cline"], r["ccol"]))
        first = rs[0]
        paths = []
        for r in rs:
            c = "%s (%s)" % (r.get("chain", r["call"]), r["effect"] == "warns" and "warns" or "resets the task state silently")
            if c not in paths:
                paths.append(c)
        if first["shape"] == "wait_event":
            where = "in the %s of %s()" % (first.get("role") == "cmd" and "cmd" or "condition", first["site"])
            if first.get("role") == "cmd":
                where += ", which runs before schedule()"
        elif first["shape"] == "prepare_to_wait":
            where = "between %s() and schedule()" % first["site"]
        elif first["shape"] == "thread_exit":
            where = "after %s() returns to kthread() with the state set in %s(%s)" % (
                first["thread"], first["site"], first.get("state", "").replace(" ", ""))
        elif (first["file"], first["cline"], first["ccol"]) not in ns_sched:
            where = "on line %d, after the wait loop has ended and before the state set by %s(%s) is " \
                    "restored" % (first["cline"], first["site"], first.get("state", "").replace(" ", ""))
        else:
            where = "between %s(%s) and schedule()" % (first["site"], first.get("state", "").replace(" ", ""))
        if first.get("locked"):
            msg = "ERROR: sleep in atomic context: %s() may sleep %s, which runs under spinlock %s" % (
                first["call"], where, first["locked"])
        else:
            msg = "WARNING: nested sleep: %s() may sleep %s" % (first["call"], where)
            if (first["shape"] != "wait_event" or first["cline"] != first["line"]) and \
                    not where.startswith("on line"):
                msg += " on line %d" % first["cline"]
        conf = "high"
        if first["shape"] != "wait_event" and first["group"] == "schedule":
            conf = "low"
        elif first["shape"] == "thread_exit":
            conf = "medium"
        msg += " (%s) [confidence: %s]" % ("; ".join(paths), conf)
        if "report" in ns_mode:
            print("%s:%s:%s-%s: %s" % (key[0], key[1], key[2], key[3], msg))
        else:
            print("* TODO [[view:%s::face=ovl-face1::linb=%s::colb=%s::cole=%s][%s]]" % (
                key[0], key[1], key[2], key[3], msg.replace("[", "@(").replace("]", ")")))
