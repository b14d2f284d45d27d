/*
 * hostgraph_tp.h: `run --tp N`'s MPI side, the scene runner's scene_tp
 * (src/scene/scene.h) over libhostgraph_mpi and a communicator.  Built only
 * when CMake finds MPI; the command and the mpi tests link it.
 */
#ifndef HG_TOOLS_HOSTGRAPH_TP_H
#define HG_TOOLS_HOSTGRAPH_TP_H

#include <mpi.h>
#include <stdio.h>

#include "hostgraph_mpi.h"
#include "scene/scene.h"

typedef struct tp_job {
    scene_tp tp;      /* what the scene runner gets (tp.user is this job) */
    MPI_Comm comm;    /* the ranks: the caller's communicator */
    hg_mpi *mpi;      /* the attached runner's attachment, or NULL */
    double timeout_s; /* hg_mpi_set_timeout for each attachment; 0: its default */
} tp_job;

/* Fills job for communicator comm, on which MPI must be initialised with at
 * least MPI_THREAD_SERIALIZED.  HG_EIO if MPI cannot say the rank or size. */
int tp_job_init(tp_job *job, MPI_Comm comm);

/* The command's --tp N (N > 1): MPI_Init_thread (MPI_THREAD_SERIALIZED),
 * then checks that MPI_COMM_WORLD has N ranks and fills job.  Returns 0, or
 * SCENE_EXIT_USAGE (a world of another size) or SCENE_EXIT_RUNTIME (a
 * thread level below SERIALIZED) after one line on err, MPI finalised. */
int tp_job_begin(tp_job *job, uint32_t n, FILE *err);
/* MPI_Finalize. */
void tp_job_end(tp_job *job);

#endif
