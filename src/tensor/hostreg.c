/*
 * hostreg.c: the registry of live host buffers' memory, an AVL tree of
 * disjoint intervals under one mutex (see hostreg.h for the rule and its
 * cost).
 *
 * Invariants: intervals in the tree are non-empty and pairwise disjoint, so
 * their starts are distinct keys and their ends are ordered as their starts;
 * every node's height is 1 + the larger of its children's, which differ by
 * at most one.  Process-wide identity state (like hostbuf ids), not run state.
 */
#include "tensor/hostreg.h"

#include <pthread.h>
#include <stdlib.h>

#include "hostgraph.h"

typedef struct node {
    hostreg_entry e;
    struct node *left, *right;
    int height;
} node;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static node *reg_root;
static size_t reg_live;
static uint64_t reg_visits;

hostreg_entry hostreg_span(const void *data, size_t bytes, uint64_t id)
{
    uintptr_t lo = (uintptr_t)data;
    uintptr_t hi = bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes;
    return (hostreg_entry){id, lo, hi};
}

static int height(const node *n)
{
    return n ? n->height : 0;
}

static void fix_height(node *n)
{
    int l = height(n->left), r = height(n->right);
    n->height = 1 + (l > r ? l : r);
}

static node *rotate_right(node *n)
{
    node *l = n->left;
    n->left = l->right;
    l->right = n;
    fix_height(n);
    fix_height(l);
    return l;
}

static node *rotate_left(node *n)
{
    node *r = n->right;
    n->right = r->left;
    r->left = n;
    fix_height(n);
    fix_height(r);
    return r;
}

/* Restores the AVL balance at n after one of its subtrees changed by one. */
static node *rebalance(node *n)
{
    fix_height(n);
    int bf = height(n->left) - height(n->right);
    if (bf > 1) {
        if (height(n->left->left) < height(n->left->right))
            n->left = rotate_left(n->left);
        return rotate_right(n);
    }
    if (bf < -1) {
        if (height(n->right->right) < height(n->right->left))
            n->right = rotate_right(n->right);
        return rotate_left(n);
    }
    return n;
}

static node *insert(node *n, node *fresh)
{
    if (n == NULL)
        return fresh;
    reg_visits++;
    if (fresh->e.lo < n->e.lo)
        n->left = insert(n->left, fresh);
    else
        n->right = insert(n->right, fresh);
    return rebalance(n);
}

/* Unlinks the smallest node of subtree n into *min; returns the new subtree. */
static node *take_min(node *n, node **min)
{
    reg_visits++;
    if (n->left == NULL) {
        *min = n;
        return n->right;
    }
    n->left = take_min(n->left, min);
    return rebalance(n);
}

static node *erase(node *n, hostreg_entry e)
{
    if (n == NULL)
        return NULL;
    reg_visits++;
    if (e.lo < n->e.lo) {
        n->left = erase(n->left, e);
    } else if (e.lo > n->e.lo) {
        n->right = erase(n->right, e);
    } else if (e.id != n->e.id) {
        return n; /* another buffer's: not ours to remove */
    } else {
        node *l = n->left, *r = n->right, *succ;
        free(n);
        reg_live--;
        if (r == NULL)
            return l;
        r = take_min(r, &succ);
        succ->left = l;
        succ->right = r;
        n = succ;
    }
    return rebalance(n);
}

/* The registration starting last below hi: the only one that can overlap
 * an interval ending at hi, since the tree's intervals are disjoint. */
static const node *last_below(uintptr_t hi)
{
    const node *n = reg_root, *best = NULL;
    while (n != NULL) {
        reg_visits++;
        if (n->e.lo < hi) {
            best = n;
            n = n->right;
        } else {
            n = n->left;
        }
    }
    return best;
}

int hostreg_add(hostreg_entry e, hostreg_entry *clash)
{
    if (e.lo >= e.hi)
        return 0;
    node *fresh = malloc(sizeof *fresh);
    if (fresh == NULL)
        return HG_ENOMEM;
    *fresh = (node){e, NULL, NULL, 1};
    pthread_mutex_lock(&reg_lock);
    const node *near = last_below(e.hi);
    if (near != NULL && near->e.hi > e.lo) {
        if (clash)
            *clash = near->e;
        pthread_mutex_unlock(&reg_lock);
        free(fresh);
        return HG_EINVAL;
    }
    reg_root = insert(reg_root, fresh);
    reg_live++;
    pthread_mutex_unlock(&reg_lock);
    return 0;
}

void hostreg_remove(hostreg_entry e)
{
    if (e.lo >= e.hi)
        return;
    pthread_mutex_lock(&reg_lock);
    reg_root = erase(reg_root, e);
    pthread_mutex_unlock(&reg_lock);
}

size_t hostreg_live(void)
{
    pthread_mutex_lock(&reg_lock);
    size_t n = reg_live;
    pthread_mutex_unlock(&reg_lock);
    return n;
}

uint64_t hostreg_visits(void)
{
    pthread_mutex_lock(&reg_lock);
    uint64_t v = reg_visits;
    pthread_mutex_unlock(&reg_lock);
    return v;
}
