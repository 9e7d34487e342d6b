# A pickle whose GLOBAL opcode names the engine's module.
import pickle

E = pickle.loads(b"candrea_course.pieces\nattention\n.")
