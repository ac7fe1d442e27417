/* version.h -- the release version, shown by --version and in build info. */
#ifndef RL_VERSION_H
#define RL_VERSION_H
#define RL_VERSION "0.1.0"
#endif
